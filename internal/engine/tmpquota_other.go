//go:build !linux

package engine

// newTmpQuota keeps the runs' temp dirs on the state dir's filesystem: only
// Linux gives the server a filesystem of a set size to put them on.
func newTmpQuota(root string, limit int64, exe string) (*tmpQuota, error) {
	return &tmpQuota{dir: root, note: "run temp dirs are not capped in total on this platform; each file is capped by the file size limit", release: func() error { return nil }}, nil
}
