// Package scripts keeps Python scripts under the state directory: scripts/
// holds scripts saved by name (with a PEP 723 header for their
// dependencies), autosaved/ holds the code of every inline run with a JSON
// sidecar of the call, so an agent (or a person) can find, read and re-run
// what was executed. Autosave is written by a background goroutine: a run
// never waits for the disk, and retention keeps the directory bounded.
package scripts

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults of the autosave retention.
const (
	DefaultMaxAutosaved = 500
	DefaultMaxAge       = 7 * 24 * time.Hour
	// MaxScriptBytes matches the engine's inline code limit: a saved script
	// is run as inline code.
	MaxScriptBytes = 1 << 20
)

// Options configure a Store.
type Options struct {
	// MaxAutosaved is how many autosaved runs are kept (oldest removed
	// first); 0 means DefaultMaxAutosaved, negative disables autosave.
	MaxAutosaved int
	// MaxAge removes autosaved runs older than this; 0 means DefaultMaxAge.
	MaxAge time.Duration
	Logger *slog.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// Store is the scripts/ and autosaved/ directories. It is safe for
// concurrent use. Close it to flush pending autosaves.
type Store struct {
	savedDir, autoDir string
	opts              Options
	log               *slog.Logger

	mu sync.Mutex // serialises writes to scripts/

	auto *autosaver
}

// Open creates (if needed) the two directories under stateDir, applies the
// retention once and starts the autosave writer.
func Open(stateDir string, opts Options) (*Store, error) {
	if opts.MaxAutosaved == 0 {
		opts.MaxAutosaved = DefaultMaxAutosaved
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultMaxAge
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		savedDir: filepath.Join(stateDir, "scripts"),
		autoDir:  filepath.Join(stateDir, "autosaved"),
		opts:     opts,
		log:      opts.Logger,
	}
	for _, d := range []string{s.savedDir, s.autoDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("scripts: create %s: %w", d, err)
		}
	}
	a, err := startAutosaver(s)
	if err != nil {
		return nil, err
	}
	s.auto = a
	return s, nil
}

// Close waits for pending autosaves to be written.
func (s *Store) Close() error {
	s.auto.close()
	return nil
}

// SavedDir and AutosavedDir are where the two stores live.
func (s *Store) SavedDir() string     { return s.savedDir }
func (s *Store) AutosavedDir() string { return s.autoDir }

// SaveRequest is a script to save by name.
type SaveRequest struct {
	Name           string
	Code           string
	Dependencies   []string
	RequiresPython string
	Overwrite      bool
}

// Entry describes one stored script.
type Entry struct {
	Name           string    `json:"name" jsonschema:"Script name (use it as script_name in run_python, or with view_script)."`
	Path           string    `json:"path" jsonschema:"Absolute path of the .py file on the server."`
	Description    string    `json:"description,omitempty" jsonschema:"First line of the module docstring."`
	Dependencies   []string  `json:"dependencies,omitempty" jsonschema:"Dependencies declared in the script's PEP 723 header."`
	RequiresPython string    `json:"requires_python,omitempty" jsonschema:"requires-python declared in the script's PEP 723 header."`
	Autosaved      bool      `json:"autosaved" jsonschema:"True for the code of an inline run saved automatically."`
	SavedAt        time.Time `json:"saved_at" jsonschema:"When the script was saved."`
	SizeBytes      int64     `json:"size_bytes" jsonschema:"Size of the .py file."`
	MetadataError  string    `json:"metadata_error,omitempty" jsonschema:"Why the PEP 723 header could not be read, if it could not."`
}

// Sidecar is the JSON kept beside each stored script.
type Sidecar struct {
	Name           string         `json:"name" jsonschema:"Script name."`
	SavedAt        time.Time      `json:"saved_at" jsonschema:"When it was saved."`
	CodeSHA256     string         `json:"code_sha256" jsonschema:"SHA-256 of the code as written."`
	Dependencies   []string       `json:"dependencies,omitempty" jsonschema:"Dependencies given when it was saved."`
	RequiresPython string         `json:"requires_python,omitempty" jsonschema:"requires-python given when it was saved."`
	Tool           string         `json:"tool,omitempty" jsonschema:"For autosaved code: the tool that ran it."`
	Arguments      map[string]any `json:"arguments,omitempty" jsonschema:"For autosaved code: the call's arguments (the code itself is the .py file; env_vars values are redacted)."`
	JobID          string         `json:"job_id,omitempty" jsonschema:"For autosaved code: the background job that ran it, if any."`
}

// Script is a stored script with its source and sidecar.
type Script struct {
	Entry
	Source  string   `json:"source" jsonschema:"The script's source."`
	Sidecar *Sidecar `json:"sidecar,omitempty" jsonschema:"The JSON sidecar saved with it (missing for files put there by hand)."`
}

// ErrNotFound is returned for an unknown script name.
var ErrNotFound = errors.New("script not found")

// Save writes a script under its name, with a PEP 723 header when
// dependencies or requires_python are given. Code that already has a script
// block and extra metadata is rejected rather than merged by guesswork.
func (s *Store) Save(req SaveRequest) (Entry, error) {
	name, err := CanonicalName(req.Name)
	if err != nil {
		return Entry{}, fieldErr("name", err)
	}
	if strings.TrimSpace(req.Code) == "" {
		return Entry{}, fieldErr("code", errors.New("is empty"))
	}
	for _, d := range req.Dependencies {
		if strings.TrimSpace(d) == "" || strings.ContainsAny(d, "\r\n\x00") {
			return Entry{}, fieldErr("dependencies", fmt.Errorf("%q is not a requirement specifier (one PEP 508 line each, like \"requests>=2\")", d))
		}
	}
	if strings.ContainsAny(req.RequiresPython, "\r\n\x00") {
		return Entry{}, fieldErr("requires_python", fmt.Errorf("%q must be one line, like \">=3.11\"", req.RequiresPython))
	}
	md := Metadata{Dependencies: req.Dependencies, RequiresPython: strings.TrimSpace(req.RequiresPython)}
	if _, found, _ := readMetadata(req.Code); found && (len(md.Dependencies) > 0 || md.RequiresPython != "") {
		return Entry{}, fieldErr("dependencies", errors.New("the code already has a PEP 723 \"# /// script\" block; declare dependencies there or remove the block"))
	}
	code, err := withHeader(req.Code, md)
	if err != nil {
		return Entry{}, err
	}
	if len(code) > MaxScriptBytes {
		return Entry{}, fieldErr("code", fmt.Errorf("is %d bytes with its header; the limit is %d", len(code), MaxScriptBytes))
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	path := filepath.Join(s.savedDir, name+".py")
	if _, err := os.Stat(path); err == nil && !req.Overwrite {
		return Entry{}, fieldErr("name", fmt.Errorf("a script named %q already exists; pass overwrite: true to replace it", name))
	}
	side := Sidecar{Name: name, SavedAt: s.opts.Now().UTC(), CodeSHA256: sha(code), Dependencies: md.Dependencies, RequiresPython: md.RequiresPython}
	if err := writeAtomic(path, []byte(code)); err != nil {
		return Entry{}, err
	}
	if err := writeJSON(filepath.Join(s.savedDir, name+".json"), side); err != nil {
		return Entry{}, err
	}
	return s.entry(s.savedDir, name, false)
}

// List returns the saved scripts by name and, when asked, the autosaved
// runs newest first.
func (s *Store) List(includeAutosaved bool) ([]Entry, error) {
	out, err := s.list(s.savedDir, false)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	if includeAutosaved {
		auto, err := s.list(s.autoDir, true)
		if err != nil {
			return nil, err
		}
		// Autosaved names start with their UTC timestamp.
		slices.SortFunc(auto, func(a, b Entry) int { return strings.Compare(b.Name, a.Name) })
		out = append(out, auto...)
	}
	return out, nil
}

func (s *Store) list(dir string, autosaved bool) ([]Entry, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("scripts: list %s: %w", dir, err)
	}
	out := []Entry{}
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), ".py")
		if !ok || !de.Type().IsRegular() {
			continue
		}
		if _, err := CanonicalName(name); err != nil {
			continue // put there by hand with a name we could not address
		}
		e, err := s.entry(dir, name, autosaved)
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				continue // removed meanwhile (retention)
			}
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func (s *Store) entry(dir, name string, autosaved bool) (Entry, error) {
	path := filepath.Join(dir, name+".py")
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Entry{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	} else if err != nil {
		return Entry{}, fmt.Errorf("scripts: %w", err)
	}
	src, err := readHead(path)
	if err != nil {
		return Entry{}, err
	}
	e := Entry{Name: name, Path: path, Description: docLine(src), Autosaved: autosaved, SavedAt: fi.ModTime().UTC(), SizeBytes: fi.Size()}
	md, _, err := readMetadata(src)
	if err != nil {
		e.MetadataError = err.Error()
	}
	e.Dependencies, e.RequiresPython = md.Dependencies, md.RequiresPython
	return e, nil
}

// View returns a script's source and sidecar.
func (s *Store) View(name string, autosaved bool) (Script, error) {
	n, err := CanonicalName(name)
	if err != nil {
		return Script{}, fieldErr("name", err)
	}
	dir := s.savedDir
	if autosaved {
		dir = s.autoDir
	}
	e, err := s.entry(dir, n, autosaved)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			where := "saved scripts (list_scripts shows them)"
			if autosaved {
				where = "autosaved runs (list_scripts with include_autosaved: true shows them)"
			}
			return Script{}, fieldErr("name", fmt.Errorf("no script %q among the %s", n, where))
		}
		return Script{}, err
	}
	src, err := os.ReadFile(e.Path)
	if err != nil {
		return Script{}, fmt.Errorf("scripts: read %s: %w", e.Path, err)
	}
	out := Script{Entry: e, Source: string(src)}
	if data, err := os.ReadFile(filepath.Join(dir, n+".json")); err == nil {
		var side Sidecar
		if json.Unmarshal(data, &side) == nil {
			out.Sidecar = &side
		}
	}
	return out, nil
}

// Source returns the code of a saved script (to run it as inline code).
func (s *Store) Source(name string) (string, error) {
	sc, err := s.View(name, false)
	if err != nil {
		return "", err
	}
	if len(sc.Source) > MaxScriptBytes {
		return "", fieldErr("script_name", fmt.Errorf("%q is %d bytes; the limit is %d", sc.Name, len(sc.Source), MaxScriptBytes))
	}
	return sc.Source, nil
}

// FieldError is a rejected request naming the field to change.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(field string, err error) error { return &FieldError{Field: field, Err: err} }
