package cli

const treeKill = "killed on timeout/cancel as a process group (TERM, grace, KILL); a process that calls setsid() leaves the group and survives"

const offLinux = `On macOS pyexec cannot confine runs: Landlock, namespaces, seccomp and cgroups are Linux.
A run under the workspace or strict policy (the default is workspace) is refused with a message
saying so. Start pyexec with --sandbox none to run without confinement (the code runs with your
rights; timeouts and the tree kill still apply), or run pyexec in its container image (a Linux
system: the sandbox works there). Memory, process and file-size limits are not enforced here.`
