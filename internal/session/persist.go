package session

import (
	"encoding/json"
	"os"
	"path/filepath"
	"time"
)

// The open sessions are recorded in StateDir/sessions.json, so that a
// restarted server lists them as lost ("server restarted") instead of
// forgetting them: a session never outlives its server (its interpreter is
// in the server's process tree, killed with it).

type record struct {
	Name     string    `json:"name"`
	Label    string    `json:"label,omitempty"`
	Created  time.Time `json:"created"`
	Settings Settings  `json:"settings"`
	Count    int       `json:"execution_count"`
}

func (m *Manager) recordPath() string {
	if m.cfg.StateDir == "" {
		return ""
	}
	return filepath.Join(m.cfg.StateDir, "sessions.json")
}

// persistLocked writes the live sessions (m.mu held). A failure only costs
// the restart report.
func (m *Manager) persistLocked() {
	path := m.recordPath()
	if path == "" || m.closed {
		return // at shutdown the record stays: the next server reports them
	}
	recs := []record{}
	for _, s := range m.sessions {
		if s.status == StatusIdle || s.status == StatusBusy {
			recs = append(recs, record{Name: s.name, Label: s.label, Created: s.created, Settings: s.settings, Count: s.count})
		}
	}
	data, _ := json.Marshal(recs)
	tmp := path + ".tmp"
	if os.WriteFile(tmp, data, 0o600) == nil {
		_ = os.Rename(tmp, path)
	}
}

// recoverLost lists the sessions a previous server left open as lost.
func (m *Manager) recoverLost() {
	path := m.recordPath()
	if path == "" {
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var recs []record
	if json.Unmarshal(data, &recs) != nil {
		return
	}
	for _, r := range recs {
		if checkName(r.Name) != nil {
			continue
		}
		m.sessions[r.Name] = &session{name: r.Name, label: r.Label, settings: r.Settings, created: r.Created, lastUsed: r.Created,
			count: r.Count, status: StatusLost, lostReason: reasonRestarted,
			lostDetail: "the server restarted; sessions do not outlive the server process"}
	}
	m.mu.Lock()
	m.persistLocked()
	m.mu.Unlock()
}
