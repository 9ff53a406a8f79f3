package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/launcher"
)

func main() {
	launcher.MaybeRun()
	dir, _ := os.MkdirTemp("/root/.local/state", "zzprof-")
	defer os.RemoveAll(dir)
	ws := filepath.Join(dir, "ws")
	os.MkdirAll(ws, 0o755)
	py := os.Getenv("PY")
	e, err := engine.New(engine.Config{Workspace: ws, StateDir: filepath.Join(dir, "state"), Python: py})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		e.Run(ctx, engine.Request{Code: "print(1)"}, nil)
	}
	time.Sleep(300 * time.Millisecond)
	fmt.Fprintln(os.Stderr, "MARK")
	os.WriteFile("/tmp/zzprof.mark", []byte("x"), 0o644)
	t0 := time.Now()
	res, err := e.Run(ctx, engine.Request{Code: "print(1)"}, nil)
	fmt.Fprintln(os.Stderr, time.Since(t0), res.Stdout, err)
	os.WriteFile("/tmp/zzprof.mark2", []byte("x"), 0o644)
	time.Sleep(100 * time.Millisecond)
}
