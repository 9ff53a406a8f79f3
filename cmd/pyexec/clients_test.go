package main

import (
	"archive/zip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A client snippet in README.md is the fenced block right after a
// "<!-- client: NAME -->" marker.
var snippetRE = regexp.MustCompile("(?s)<!-- client: ([a-z0-9-]+) -->\\s*```([a-z]+)\\n(.*?)```")

type snippet struct{ name, lang, body string }

func readmeSnippets(t *testing.T) []snippet {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []snippet
	for _, m := range snippetRE.FindAllStringSubmatch(string(b), -1) {
		out = append(out, snippet{m[1], m[2], m[3]})
	}
	return out
}

// serverEntry is what every client's config boils down to.
type serverEntry struct {
	Command string            `json:"command" toml:"command"`
	Args    []string          `json:"args" toml:"args"`
	Env     map[string]string `json:"env" toml:"env"`
	Type    string            `json:"type" toml:"type"`
}

// parseSnippet reads a snippet the way its client reads its config file.
func parseSnippet(s snippet) (serverEntry, error) {
	var e serverEntry
	switch s.lang {
	case "json":
		var doc struct {
			MCPServers map[string]serverEntry `json:"mcpServers"` // Claude Desktop, Claude Code, Cursor
			Servers    map[string]serverEntry `json:"servers"`    // VS Code
		}
		dec := json.NewDecoder(strings.NewReader(s.body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&doc); err != nil {
			return e, err
		}
		var ok bool
		if e, ok = doc.MCPServers["pyexec"]; !ok {
			if e, ok = doc.Servers["pyexec"]; !ok {
				return e, fmt.Errorf("no pyexec server in the snippet")
			}
		}
	case "toml": // Codex: [mcp_servers.pyexec]
		var doc struct {
			MCPServers map[string]serverEntry `toml:"mcp_servers"`
		}
		md, err := toml.Decode(s.body, &doc)
		if err != nil {
			return e, err
		}
		if un := md.Undecoded(); len(un) > 0 {
			return e, fmt.Errorf("unknown keys %v", un)
		}
		e = doc.MCPServers["pyexec"]
	case "sh": // claude mcp add NAME [--scope S] -- COMMAND ARGS...
		words, err := shellWords(s.body)
		if err != nil {
			return e, err
		}
		if len(words) < 5 || words[0] != "claude" || words[1] != "mcp" || words[2] != "add" {
			return e, fmt.Errorf("not a claude mcp add line: %q", words)
		}
		for i, w := range words {
			if w == "--" {
				e.Command, e.Args = words[i+1], words[i+2:]
				break
			}
		}
	default:
		return e, fmt.Errorf("unknown snippet language %q", s.lang)
	}
	if e.Command == "" {
		return e, fmt.Errorf("no command")
	}
	if e.Type != "" && e.Type != "stdio" {
		return e, fmt.Errorf("type %q, want stdio", e.Type)
	}
	return e, nil
}

// shellWords splits one command line as a POSIX shell would for the
// quoting the README uses (double quotes, $PWD left for the caller).
func shellWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord, quote := false, byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '"' || c == '\'':
			quote, inWord = c, true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated quote in %q", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// How each client starts a server: the directory it starts it in, and the
// variables it expands in the config. Claude Desktop starts servers in "/"
// and expands nothing, so its snippets name the workspace; Claude Code
// starts them in the project; Cursor and VS Code expand ${workspaceFolder};
// Codex passes only a short list of variables.
var clients = map[string]struct {
	cwdIsProject bool
	minimalEnv   bool
}{
	"claude-desktop-macos":   {},
	"claude-desktop-windows": {},
	"claude-desktop-linux":   {},
	"claude-code-cli":        {cwdIsProject: true},
	"claude-code-project":    {cwdIsProject: true},
	"cursor":                 {},
	"vscode":                 {cwdIsProject: true},
	"codex":                  {minimalEnv: true},
}

// placeholders stand for the reader's own paths in the snippets.
var (
	binPlaceholders     = []string{"/usr/local/bin/pyexec", `C:\Program Files\pyexec\pyexec.exe`}
	projectPlaceholders = []string{"/Users/you/project", "/home/you/project", `C:\Users\you\project`, "${workspaceFolder}", "$PWD"}
)

// TestREADMEClientSnippets parses every MCP client snippet in README.md as
// its client would, starts its command the way that client starts it (the
// README's install path or PATH lookup of a freshly built pyexec, the
// client's working directory and environment) and talks MCP to it with a
// real client: initialize, tools/list, and one run that shows the
// workspace is the project.
func TestREADMEClientSnippets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pyexec and starts one server per snippet")
	}
	snips := readmeSnippets(t)
	seen := map[string]bool{}
	bin := buildPyexec(t)
	for _, s := range snips {
		seen[s.name] = true
		t.Run(s.name, func(t *testing.T) {
			if s.name == "container" {
				runContainerSnippet(t, s)
				return
			}
			c, ok := clients[s.name]
			if !ok {
				t.Fatalf("snippet %q has no client in this test", s.name)
			}
			e, err := parseSnippet(s)
			if err != nil {
				t.Fatalf("parse: %v\n%s", err, s.body)
			}
			project := t.TempDir()
			if p, err := filepath.EvalSymlinks(project); err == nil {
				project = p
			}
			cmdPath := e.Command
			for _, p := range binPlaceholders {
				if cmdPath == p {
					cmdPath = bin
				}
			}
			env := []string{"PATH=" + filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + t.TempDir()}
			if !c.minimalEnv {
				env = append(env, "LANG=C.UTF-8")
			}
			for k, v := range e.Env {
				env = append(env, k+"="+v)
			}
			if cmdPath == "pyexec" {
				if cmdPath, err = lookPathIn(env, "pyexec"); err != nil {
					t.Fatal(err)
				}
			}
			args := make([]string, len(e.Args))
			for i, a := range e.Args {
				for _, p := range projectPlaceholders {
					a = strings.ReplaceAll(a, p, project)
				}
				args[i] = a
			}
			args = append(args, "--state-dir", t.TempDir(), "--warm", "0") // keep tests apart and light
			cmd := exec.Command(cmdPath, args...)
			cmd.Env = env
			cmd.Dir = "/"
			if c.cwdIsProject {
				cmd.Dir = project
			}
			checkServer(t, cmd, project)
		})
	}
	for name := range clients {
		if !seen[name] {
			t.Errorf("README.md has no snippet for client %q", name)
		}
	}
	if !seen["container"] {
		t.Errorf("README.md has no container snippet")
	}
}

func lookPathIn(env []string, name string) (string, error) {
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range filepath.SplitList(p) {
				if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && !fi.IsDir() {
					return filepath.Join(dir, name), nil
				}
			}
		}
	}
	return "", fmt.Errorf("%s not on the client's PATH", name)
}

// checkServer connects a real MCP client to cmd and expects pyexec's tools
// and a run in workspace.
func checkServer(t *testing.T, cmd *exec.Cmd, workspace string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "snippet-test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("initialize: %v\nstderr:\n%s", err, stderr.String())
	}
	defer cs.Close()
	if v := cs.InitializeResult().ServerInfo; v == nil || v.Name != "pyexec" {
		t.Fatalf("server info %+v", v)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range tools.Tools {
		names[tl.Name] = true
	}
	for _, want := range []string{"run_python", "run_python_batch", "server_info", "get_job"} {
		if !names[want] {
			t.Fatalf("tools/list lacks %s: %v", want, names)
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "import os; print(os.getcwd())"}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(res.StructuredContent)
	var r struct {
		Stdout   string `json:"stdout"`
		ExitCode int    `json:"exit_code"`
	}
	json.Unmarshal(out, &r)
	if res.IsError || r.ExitCode != 0 || strings.TrimSpace(r.Stdout) != workspace {
		t.Fatalf("run_python in the workspace: %s (want cwd %s)\nstderr:\n%s", out, workspace, stderr.String())
	}
}

// buildPyexec builds the real binary (not this test binary) into a
// directory of its own, as an install would put it on PATH.
func buildPyexec(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	name := "pyexec"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	bin := filepath.Join(dir, name)
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runContainerSnippet runs the README's container snippet when an image
// and a container CLI are named (PYEXEC_TEST_IMAGE, PYEXEC_CONTAINER_CLI,
// e.g. podman): scripts/container-smoke.sh sets them. CI has no image
// engine, so there it is skipped with that reason.
func runContainerSnippet(t *testing.T, s snippet) {
	image, cli := os.Getenv("PYEXEC_TEST_IMAGE"), os.Getenv("PYEXEC_CONTAINER_CLI")
	e, err := parseSnippet(s)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, s.body)
	}
	if e.Command != "docker" || len(e.Args) < 3 || e.Args[0] != "run" {
		t.Fatalf("container snippet is not a docker run: %+v", e)
	}
	if image == "" || cli == "" {
		t.Skip("no container engine here: set PYEXEC_TEST_IMAGE and PYEXEC_CONTAINER_CLI (scripts/container-smoke.sh does)")
	}
	project := t.TempDir()
	os.Chmod(project, 0o777)
	var args []string
	for _, a := range e.Args {
		a = strings.ReplaceAll(a, "$PWD", project)
		if a == "pyexec:latest" {
			a = image
		}
		if p := os.Getenv("PYEXEC_SECCOMP_PROFILE"); p != "" {
			a = strings.ReplaceAll(a, "/usr/local/share/pyexec/seccomp.json", p)
		}
		args = append(args, a)
	}
	cmd := exec.Command(cli, args...)
	checkServer(t, cmd, "/workspace")
}

// TestMCPBBundle unpacks the MCP Bundle named by PYEXEC_MCPB (scripts/mcpb.sh
// makes them) and starts its server the way Claude Desktop does: the
// manifest's mcp_config with ${__dirname} and ${user_config.*} filled in.
func TestMCPBBundle(t *testing.T) {
	bundle := os.Getenv("PYEXEC_MCPB")
	if bundle == "" {
		t.Skip("set PYEXEC_MCPB to a .mcpb built for this platform (bash scripts/mcpb.sh)")
	}
	dir := t.TempDir()
	zr, err := zip.OpenReader(bundle)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	for _, f := range zr.File {
		dst := filepath.Join(dir, filepath.FromSlash(f.Name))
		if !strings.HasPrefix(dst, dir+string(os.PathSeparator)) {
			t.Fatalf("bundle entry %q escapes", f.Name)
		}
		os.MkdirAll(filepath.Dir(dst), 0o755)
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, f.Mode()|0o600); err != nil {
			t.Fatal(err)
		}
	}
	var m struct {
		Server struct {
			MCPConfig struct {
				Command string   `json:"command"`
				Args    []string `json:"args"`
			} `json:"mcp_config"`
		} `json:"server"`
		UserConfig map[string]struct {
			Default any `json:"default"`
		} `json:"user_config"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	workspace := t.TempDir()
	if p, err := filepath.EvalSymlinks(workspace); err == nil {
		workspace = p
	}
	expand := func(s string) string {
		s = strings.ReplaceAll(s, "${__dirname}", dir)
		s = strings.ReplaceAll(s, "${user_config.workspace}", workspace)
		for k, v := range m.UserConfig {
			s = strings.ReplaceAll(s, "${user_config."+k+"}", fmt.Sprint(v.Default))
		}
		return s
	}
	var args []string
	for _, a := range m.Server.MCPConfig.Args {
		args = append(args, expand(a))
	}
	cmd := exec.Command(expand(m.Server.MCPConfig.Command), append(args, "--state-dir", t.TempDir(), "--warm", "0")...)
	cmd.Dir = "/"
	checkServer(t, cmd, workspace)
}

// TestMCPBManifestTools keeps the bundle manifest's tool list (what Claude
// Desktop shows before installing) equal to what `pyexec mcp` offers by
// default.
func TestMCPBManifestTools(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pyexec")
	}
	b, err := os.ReadFile("../../deploy/mcpb/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, tl := range m.Tools {
		listed = append(listed, tl.Name)
	}
	cmd := exec.Command(buildPyexec(t), "mcp", "--state-dir", t.TempDir(), "--warm", "0")
	cmd.Dir = t.TempDir()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "manifest-test", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var offered []string
	for _, tl := range res.Tools {
		offered = append(offered, tl.Name)
	}
	slices.Sort(listed)
	slices.Sort(offered)
	if !slices.Equal(listed, offered) {
		t.Fatalf("deploy/mcpb/manifest.json lists %v; pyexec mcp offers %v", listed, offered)
	}
}
