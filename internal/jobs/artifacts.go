package jobs

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/pyexec/pyexec/internal/engine"
)

// Why artifacts: what a run displayed (matplotlib figures, display() of an
// image or a DataFrame) is part of its result, not of its streams. A run
// handed off to a job, or one whose images were too many or too large to
// send inline, would otherwise lose them: the job keeps only logs. So a
// kept job's displays are written next to its logs, one file per image,
// listed in its RunInfo (which the stores save as JSON, so remote clients
// and replicas see the list), and readable as job://ID/artifacts/NAME.

// Artifact is one thing a job's run displayed.
type Artifact struct {
	Name   string `json:"name" jsonschema:"File name of the artifact (display-N.png for the N-th display): read it as job://ID/artifacts/NAME."`
	MIME   string `json:"mime,omitempty" jsonschema:"Media type of the stored file (image/png, image/jpeg, image/gif); empty for a display with text only."`
	Bytes  int    `json:"bytes,omitempty" jsonschema:"Size of the stored file."`
	Width  int    `json:"width,omitempty" jsonschema:"Pixels."`
	Height int    `json:"height,omitempty" jsonschema:"Pixels."`
	Source string `json:"source,omitempty" jsonschema:"display (display() or IPython.display) or figure (a matplotlib figure)."`
	Text   string `json:"text,omitempty" jsonschema:"The display's text form (markdown table, plain repr), at most 4 KB."`
}

// Bounds of what a job keeps of its displays.
const (
	maxArtifacts     = 64
	maxArtifactText  = 4 << 10
	artifactsDirName = "artifacts"
)

// ArtifactName is the name of the n-th display (0-based) of a run stored
// as mime.
func ArtifactName(n int, mime string) string {
	ext := "txt"
	switch mime {
	case "image/png":
		ext = "png"
	case "image/jpeg":
		ext = "jpg"
	case "image/gif":
		ext = "gif"
	}
	return fmt.Sprintf("display-%d.%s", n+1, ext)
}

// ArtifactURI is the resource URI of a job's artifact.
func ArtifactURI(jobID, name string) string { return "job://" + jobID + "/artifacts/" + name }

var imageMIMEs = []string{"image/png", "image/jpeg", "image/gif"}

// textMIMEs, best first, for an artifact's text form.
var textMIMEs = []string{"text/markdown", "text/plain", "text/html"}

// writeArtifacts stores a finished run's displays in the job's directory
// and returns their list. Errors are logged: the result is kept without
// them.
func (m *Manager) writeArtifacts(id string, ds []engine.Display) []Artifact {
	if len(ds) == 0 {
		return nil
	}
	dir := filepath.Join(jobDir(m.cfg.StateDir, id), artifactsDirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		m.log.Error("job artifacts", "job", id, "err", err)
		return nil
	}
	var out []Artifact
	for i, d := range ds {
		if i == maxArtifacts {
			break
		}
		a := Artifact{Source: d.Source, Width: d.Width, Height: d.Height}
		for _, mt := range textMIMEs {
			if t, ok := d.Data[mt]; ok {
				a.Text = clipText(t, maxArtifactText)
				break
			}
		}
		for _, mt := range imageMIMEs {
			v, ok := d.Data[mt]
			if !ok {
				continue
			}
			raw, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				continue
			}
			a.Name, a.MIME, a.Bytes = ArtifactName(i, mt), mt, len(raw)
			if err := os.WriteFile(filepath.Join(dir, a.Name), raw, 0o600); err != nil {
				m.log.Error("job artifacts", "job", id, "err", err)
				a.Name, a.MIME, a.Bytes = "", "", 0
			}
			break
		}
		if a.Name == "" {
			a.Name = ArtifactName(i, "")
		}
		out = append(out, a)
	}
	return out
}

// Artifact reads a stored artifact of a job: its bytes and media type.
func (m *Manager) Artifact(ctx context.Context, id, name string) ([]byte, string, error) {
	j, err := m.Get(ctx, id)
	if err != nil {
		return nil, "", err
	}
	if j.Run != nil {
		for _, a := range j.Run.Artifacts {
			if a.Name != name {
				continue
			}
			if a.MIME == "" {
				return []byte(a.Text), "text/plain", nil
			}
			b, err := os.ReadFile(filepath.Join(jobDir(m.cfg.StateDir, id), artifactsDirName, name))
			if errors.Is(err, fs.ErrNotExist) {
				return nil, "", fmt.Errorf("job %s: artifact %s is not on this server (it is kept where the job ran): %w", id, name, ErrNotFound)
			}
			if err != nil {
				return nil, "", fmt.Errorf("job %s: artifact %s: %w", id, name, err)
			}
			return b, a.MIME, nil
		}
	}
	return nil, "", fmt.Errorf("job %s has no artifact %q: %w", id, name, ErrNotFound)
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.TrimRight(s[:cut], "\n") + "\n[... cut]"
}
