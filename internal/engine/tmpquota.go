package engine

// DefaultTmpLimit is the total size of all runs' temp dirs together when
// the server can enforce it (as root on Linux): they live on a memory-backed
// filesystem of that size, so a run filling its TMPDIR fills neither the
// state dir's disk nor another run's share of memory beyond its own limit.
const DefaultTmpLimit = 2 << 30

// tmpQuota is where the runs' temp dirs are made and what holds them.
type tmpQuota struct {
	dir     string // parent of the runs' temp dirs
	limit   int64  // bytes, 0 when not enforced
	note    string // why it is not enforced, for doctor and server_info
	release func() error
}
