package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Run-as: when the server runs as root, Python should not. Root ignores
// RLIMIT_NPROC, may signal or ptrace the server, and can read every file.
//
// The trouble is ownership: an unprivileged uid cannot write a workspace
// owned by root, and cannot even reach an interpreter or a state dir under
// /root, which is 0700 on these machines. pyexec never changes permissions
// behind the operator's back. Instead, in the run's private mount namespace
// (root server):
//
//   - every needed path below an ancestor the run uid cannot search is
//     bound back into a read-only tmpfs skeleton covering that ancestor
//     (reach.go): the run reaches its interpreter, environment, code file,
//     jobs helper and tmp dir, and nothing else of /root exists for it;
//   - a workspace owned by the server's uid is mounted over itself with an
//     idmapping (idmap.go): the run writes it as its owner, files stay the
//     server's on disk.
//
// Modes:
//
//   - RunAsAuto (the default): run as "nobody" when, with the above, nobody
//     can execute the interpreter and write the workspace; otherwise the
//     run is refused with what to fix. It never falls back to root: that
//     would give the run root's ownership of every root-owned file the
//     sandbox leaves readable or writable.
//   - RunAsNone ("none"/"root"): always as the server's uid (capabilities
//     dropped when root), only when the operator asks for it.
//   - a user name or uid[:gid]: always as that user; fail closed if the
//     interpreter is unreachable or the binds fail; warn if the workspace
//     is not writable.
//
// The per-run temp dir is always made writable by chowning it (Prepare),
// it belongs to the run anyway. A workspace of another user that nobody
// cannot write needs the operator's grant: e.g.
// `setfacl -R -m u:nobody:rwX -m d:u:nobody:rwX WS`, or a dedicated uid.
// LookupCredential resolves "name", "uid" or "uid:gid".
func LookupCredential(s string) (*Credential, error) {
	if uidS, gidS, ok := strings.Cut(s, ":"); ok {
		uid, err1 := strconv.ParseUint(uidS, 10, 32)
		gid, err2 := strconv.ParseUint(gidS, 10, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("sandbox: run-as %q: want NAME, UID or UID:GID", s)
		}
		return &Credential{Name: s, UID: uint32(uid), GID: uint32(gid)}, nil
	}
	var u *user.User
	var err error
	if _, perr := strconv.ParseUint(s, 10, 32); perr == nil {
		u, err = user.LookupId(s)
	} else {
		u, err = user.Lookup(s)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: run-as user %q: %w", s, err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &Credential{Name: u.Username, UID: uint32(uid), GID: uint32(gid)}, nil
}

// CheckAccess tells whether cred could open path with the wanted access
// (AccessRead|AccessWrite|AccessExec), by walking the path's components with
// plain permission bits (no ACLs, primary group only). It exists because
// faccessat checks the caller (root), not the run's uid.
func CheckAccess(cred *Credential, path string, want uint32) error {
	if cred == nil || cred.UID == 0 {
		return nil
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	real, _ = filepath.Abs(real)
	// Every ancestor directory needs search (x) permission.
	dir := "/"
	for _, part := range strings.Split(strings.TrimPrefix(filepath.Dir(real), "/"), "/") {
		if part == "" {
			continue
		}
		dir = filepath.Join(dir, part)
		if err := modeAllows(cred, dir, AccessExec); err != nil {
			return err
		}
	}
	return modeAllows(cred, real, want)
}

func modeAllows(cred *Credential, path string, want uint32) error {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	perm := st.Mode & 0o7
	switch {
	case st.Uid == cred.UID:
		perm = (st.Mode >> 6) & 0o7
	case st.Gid == cred.GID:
		perm = (st.Mode >> 3) & 0o7
	}
	if perm&want != want {
		return fmt.Errorf("%s (mode %04o, owner %d:%d) does not allow uid %d %s", path, st.Mode&0o7777, st.Uid, st.Gid, cred.UID, accessName(want))
	}
	return nil
}

func accessName(w uint32) string {
	var s []string
	if w&AccessRead != 0 {
		s = append(s, "read")
	}
	if w&AccessWrite != 0 {
		s = append(s, "write")
	}
	if w&AccessExec != 0 {
		s = append(s, "execute/search")
	}
	return strings.Join(s, "+")
}

// ChooseRunAs decides who runs Python. mode is RunAsAuto (""), RunAsNone,
// or a user. workspace must be writable and each of mustRead (interpreter,
// state dir code files...) readable+executable by the chosen identity.
func ChooseRunAs(mode, workspace string, mustRead []string) (RunAsChoice, error) {
	if mode == "" {
		mode = RunAsAuto
	}
	if mode == RunAsNone || mode == "root" {
		if os.Geteuid() == 0 {
			return RunAsChoice{Notes: []string{"runs execute as root without capabilities (--run-as none)"}}, nil
		}
		return RunAsChoice{}, nil
	}
	if os.Geteuid() != 0 {
		if mode == RunAsAuto {
			return RunAsChoice{}, nil
		}
		return RunAsChoice{}, fmt.Errorf("sandbox: --run-as %s needs the server to run as root", mode)
	}
	name := mode
	if mode == RunAsAuto {
		name = DefaultRunAsUser
	}
	cred, err := LookupCredential(name)
	if err != nil {
		if mode == RunAsAuto {
			return RunAsChoice{}, fmt.Errorf("sandbox: runs execute as %s when the server is root, but: %v (create the user, pass --run-as USER, or --run-as none to run as root without capabilities)", name, err)
		}
		return RunAsChoice{}, err
	}
	// With a private mount namespace, ancestors cred cannot search are
	// replaced by a 0755 skeleton holding only the needed paths: then what
	// counts is access to the needed paths themselves.
	check := CheckAccess
	var hidden []string
	if ReachAvailable() {
		roots := append([]string{workspace}, mustRead...)
		realRoots := resolveAll(roots)
		check = func(c *Credential, p string, want uint32) error {
			return checkBoundAccess(c, p, want, realRoots)
		}
		hidden = hiddenTops(cred, roots)
	}
	var unreachable []error
	for _, p := range mustRead {
		if err := check(cred, p, AccessRead); err != nil {
			unreachable = append(unreachable, err)
		}
	}
	var wsErr error
	var idmapped bool
	if workspace != "" {
		wsErr = check(cred, workspace, AccessWrite|AccessExec)
		// The operator's own workspace: an idmapped mount in the run's
		// namespace lets the run uid write it as its owner (idmap.go).
		if wsErr != nil && needsIdmap(cred, workspace) && check(cred, workspace, AccessExec) == nil {
			if err := IdmapAvailable(cred, workspace); err == nil {
				wsErr, idmapped = nil, true
			}
		}
	}
	if mode == RunAsAuto {
		// The first problem is enough to act on; the rest usually repeat it.
		switch {
		case len(unreachable) > 0:
			return RunAsChoice{}, fmt.Errorf("sandbox: runs execute as %s (uid %d) when the server is root, and it cannot read what runs need: %v (use an interpreter and environments it can read, e.g. /usr/bin/python3, or pass --run-as none to run as root without capabilities)",
				name, cred.UID, unreachable[0])
		case wsErr != nil:
			return RunAsChoice{}, fmt.Errorf("sandbox: runs execute as %s (uid %d) when the server is root, and it cannot write the workspace: %v (give it write access, e.g. `setfacl -R -m u:%s:rwX -m d:u:%s:rwX %s`, or make the server's user own the workspace so runs write it through an idmapped mount; or pass --run-as none to run as root without capabilities)",
				name, cred.UID, wsErr, name, name, workspace)
		}
		return RunAsChoice{Cred: cred, Hidden: hidden, IdmappedWorkspace: idmapped}, nil
	}
	if err := errors.Join(unreachable...); err != nil {
		return RunAsChoice{}, fmt.Errorf("sandbox: run-as %s cannot reach what runs need: %w (e.g. /root is 0700: use an interpreter outside it such as /usr/bin/python3)", name, err)
	}
	ch := RunAsChoice{Cred: cred, Hidden: hidden, IdmappedWorkspace: idmapped}
	if wsErr != nil {
		ch.Notes = append(ch.Notes, fmt.Sprintf("workspace not writable by %s: %v; writes into it will fail with EACCES", name, wsErr))
	}
	return ch, nil
}
