package workspace

// Change is a workspace file a run created, modified or deleted.
type Change struct {
	Path   string // relative to the workspace, slash-separated
	Kind   string // created, modified or deleted
	Size   int64
	MIME   string
	SHA256 string // empty for deleted files and files over MaxHashBytes
	// Concurrent: another run was active in the workspace when the change
	// was seen; it may be that run's.
	Concurrent bool
}
