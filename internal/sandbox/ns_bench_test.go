package sandbox

import (
	"runtime"
	"testing"
)

func benchThread(b *testing.B, f func() error) {
	for i := 0; i < b.N; i++ {
		done := make(chan error)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread is discarded
			done <- f()
		}()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

// Cost of the per-run namespaces, each on a throwaway thread.
func BenchmarkPrivateShm(b *testing.B) {
	benchThread(b, func() error { return enterPrivateShm(64 << 20) })
}
func BenchmarkEmptyNetNS(b *testing.B) { benchThread(b, enterEmptyNetNS) }
