package uvenv

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestNamedEnvLifecycle(t *testing.T) {
	f := newFixture(t)
	m := f.manager(func(c *Config) { c.MaxBytes = 1 }) // every env is over the cap
	ctx := context.Background()

	rec, env, err := m.CreateNamed(ctx, "data", Spec{Python: basePython, Requirements: []string{"pyexec-alpha==1.0"}}, false, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Key != env.Key || rec.Name != "data" || len(rec.Requirements) != 1 {
		t.Fatalf("record %+v for env %+v", rec, env)
	}
	if _, _, err := m.CreateNamed(ctx, "data", Spec{Python: basePython, Requirements: []string{"pyexec-beta"}}, false, "", nil); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second create under one name: %v", err)
	}
	// A build of another env evicts everything over the cap but the named one.
	_, release, err := m.Ensure(ctx, Spec{Python: basePython, Requirements: []string{"pyexec-beta"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	release()
	m.Wait()
	if _, err := m.Prune(ctx, PruneOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	envs, _ := m.List(ctx)
	if len(envs) != 1 || envs[0].Key != rec.Key || len(envs[0].Names) != 1 || envs[0].Names[0] != "data" {
		t.Fatalf("after eviction and prune --all: %+v", envs)
	}

	// Reached by name; rebuilt when its files went missing.
	got, release, err := m.EnsureNamed(ctx, "data", nil)
	if err != nil || got.Key != rec.Key || got.Built {
		t.Fatalf("EnsureNamed: %+v %v", got, err)
	}
	release()
	m.Wait()
	if _, err := m.remove(rec.Key); err != nil {
		t.Fatal(err)
	}
	got, release, err = m.EnsureNamed(ctx, "data", nil)
	if err != nil || !got.Built {
		t.Fatalf("EnsureNamed after the files were removed: %+v %v", got, err)
	}
	release()
	m.Wait()

	res, err := m.DeleteNamed(ctx, "data")
	if err != nil || !res.Removed || res.FreedBytes <= 0 {
		t.Fatalf("delete: %+v %v", res, err)
	}
	if _, err := os.Stat(got.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("env files left after delete: %v", err)
	}
	if _, _, err := m.EnsureNamed(ctx, "data", nil); !errors.Is(err, ErrNoNamedEnv) {
		t.Fatalf("deleted name still resolves: %v", err)
	}
	if _, err := m.DeleteNamed(ctx, "data"); !errors.Is(err, ErrNoNamedEnv) {
		t.Fatalf("second delete: %v", err)
	}
}

func TestNamedEnvSharedAndInUse(t *testing.T) {
	f := newFixture(t)
	m := f.manager()
	ctx := context.Background()
	spec := Spec{Python: basePython, Requirements: []string{"pyexec-alpha==1.0"}}
	a, _, err := m.CreateNamed(ctx, "a", spec, false, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.CreateNamed(ctx, "b", spec, false, "", nil); err != nil {
		t.Fatal(err)
	}
	res, err := m.DeleteNamed(ctx, "a")
	if err != nil || res.Removed || !strings.Contains(res.Note, "b") {
		t.Fatalf("delete of a shared env: %+v %v", res, err)
	}
	env, release, err := m.EnsureNamed(ctx, "b", nil)
	if err != nil || env.Key != a.Key {
		t.Fatalf("b: %+v %v", env, err)
	}
	res, err = m.DeleteNamed(ctx, "b") // a run still holds it
	release()
	if err != nil || res.Removed || res.Note == "" {
		t.Fatalf("delete of an env in use: %+v %v", res, err)
	}
}

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"data", true}, {"ml_3.11-v2", true}, {"", false}, {"../x", false}, {"a/b", false},
		{".hidden", false}, {"-flag", false}, {strings.Repeat("x", 65), false}, {"sp ace", false},
	} {
		if err := CheckName(tc.name); (err == nil) != tc.ok {
			t.Errorf("CheckName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
