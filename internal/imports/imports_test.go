package imports

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/executor"
	"github.com/pyexec/pyexec/internal/launcher"
	"github.com/pyexec/pyexec/internal/testutil/wheels"
	"github.com/pyexec/pyexec/internal/uvenv"
)

func TestMain(m *testing.M) {
	launcher.MaybeRun()
	os.Exit(m.Run())
}

const script = `"""A script with every kind of import."""
from __future__ import annotations
import os, sys
import json
import numpy as np
import sklearn.linear_model
from PIL import Image
import cv2, yaml
from bs4 import BeautifulSoup
import skimage
import helper
import pyexec_alpha
from . import sibling
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    import pandas
try:
    import ujson
except ImportError:
    ujson = None
if sys.version_info >= (3, 8):
    import pyexec_beta

def later():
    import matplotlib
`

func newExecutor(t *testing.T) (*executor.Local, string) {
	t.Helper()
	ws := t.TempDir()
	eng, err := engine.New(engine.Config{Workspace: ws, StateDir: t.TempDir(),
		Deps: engine.DepsConfig{Index: uvenv.IndexSettings{NoIndex: true, Offline: true, FindLinks: []string{wheels.Dir(t)}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return executor.NewLocal(eng, "test", 0), ws
}

func TestInfer(t *testing.T) {
	ex, ws := newExecutor(t)
	ctx := context.Background()
	os.WriteFile(filepath.Join(ws, "helper.py"), []byte("X = 1\n"), 0o644)

	r, err := Infer(ctx, ex, engine.Request{Code: script}, []string{"PyYAML>=6"})
	if err != nil {
		t.Fatal(err)
	}
	wantImports := []string{"__future__", "os", "sys", "json", "numpy", "sklearn", "PIL", "cv2", "yaml", "bs4", "skimage", "helper", "pyexec_alpha", "typing", "pyexec_beta"}
	if !slices.Equal(r.Imports, wantImports) {
		t.Errorf("imports = %v\nwant      %v", r.Imports, wantImports)
	}
	// helper is a local module of the cwd; the standard library is the
	// interpreter's own list; yaml is declared (as PyYAML).
	wantAdded := []string{"numpy", "scikit-learn", "pillow", "opencv-python", "beautifulsoup4", "scikit-image", "pyexec_alpha", "pyexec_beta"}
	if !slices.Equal(r.Added, wantAdded) {
		t.Errorf("added = %v\nwant    %v", r.Added, wantAdded)
	}

	// In an environment that has the package, nothing is added for it.
	if _, err := ex.CreateEnv(ctx, executor.EnvCreateRequest{Name: "alpha", Dependencies: []string{"pyexec-alpha==1.0"}}, nil); err != nil {
		t.Fatal(err)
	}
	r, err = Infer(ctx, ex, engine.Request{Code: "import pyexec_alpha, numpy\n", Env: "alpha"}, nil)
	if err != nil || !slices.Equal(r.Added, []string{"numpy"}) {
		t.Fatalf("in env alpha: %+v %v", r, err)
	}

	// A workspace script is read inside the sandbox, relative to cwd.
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	os.WriteFile(filepath.Join(ws, "sub", "job.py"), []byte("import bs4\nimport local_mod\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "sub", "local_mod.py"), []byte(""), 0o644)
	r, err = Infer(ctx, ex, engine.Request{ScriptPath: "job.py", Cwd: "sub"}, nil)
	if err != nil || !slices.Equal(r.Added, []string{"beautifulsoup4"}) {
		t.Fatalf("script in sub: %+v %v", r, err)
	}

	// A PEP 723 block declares the dependencies: nothing is added.
	r, err = Infer(ctx, ex, engine.Request{Code: "# /// script\n# dependencies = []\n# ///\nimport numpy\n"}, nil)
	if err != nil || !r.Metadata || len(r.Added) != 0 {
		t.Fatalf("with a PEP 723 block: %+v %v", r, err)
	}

	// Code that does not parse is a request error naming the field.
	_, err = Infer(ctx, ex, engine.Request{Code: "import (\n"}, nil)
	var re *engine.RequestError
	if !errors.As(err, &re) || re.Field != "script_content" {
		t.Fatalf("syntax error: %v", err)
	}
}

func TestDistribution(t *testing.T) {
	for mod, dist := range map[string]string{
		"sklearn": "scikit-learn", "cv2": "opencv-python", "PIL": "pillow", "yaml": "pyyaml",
		"bs4": "beautifulsoup4", "skimage": "scikit-image", "dateutil": "python-dateutil",
		"numpy": "numpy", "google": "",
	} {
		if got := Distribution(mod); got != dist {
			t.Errorf("Distribution(%q) = %q, want %q", mod, got, dist)
		}
	}
}
