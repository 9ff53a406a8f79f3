//go:build linux

package engine

// dedicate takes z out of the pool for the long-lived run just handed to
// it (a session, see session_unix.go): closing the control socket lets the
// run go on and makes the fork server exit once it ends, so nothing else
// ever shares its namespaces. A replacement starts now, in the background,
// so that the next run (or session) finds one ready.
func (w *warmPool) dedicate(z *zygote, p *prepared) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.retireLocked(z)
	if !w.closed && len(w.zs[z.key]) == 0 {
		w.startLocked(z.key, p)
	}
}
