package cli

// treeKill says how a run's whole process tree is ended here.
const treeKill = "killed on timeout/cancel by a per-run subreaper launcher (TERM, grace, KILL), with a cgroup where one can be made"

// offLinux is what doctor adds about this platform's limits (nothing on Linux).
const offLinux = ""
