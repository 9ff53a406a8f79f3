package cli

const treeKill = "killed on timeout/cancel with the run's Job Object (at once: Windows has no SIGTERM); the job also caps memory and process count"

const offLinux = `On Windows pyexec cannot confine runs: Landlock, namespaces, seccomp and cgroups are Linux.
A run under the workspace or strict policy (the default is workspace) is refused with a message
saying so. Start pyexec with --sandbox none to run without confinement (the code runs with your
rights; timeouts, the Job Object's tree kill and its memory and process caps still apply), or run
pyexec in its container image (a Linux system: the sandbox works there).`
