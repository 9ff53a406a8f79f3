package mcpstdio

import "encoding/json"

// idSniffer finds the top-level "id" of a JSON-RPC message that streams by
// in pieces, holding only the id itself: a line over the size limit is
// never kept whole, but its error reply can still carry the id the client
// waits on. It understands just enough JSON for that: strings and their
// escapes, nesting, and which strings of the top-level object are keys.
type idSniffer struct {
	depth         int
	inStr, esc    bool
	expectKey     bool // at depth 1, the next string is a key
	collectingKey bool
	key           []byte
	keyTooLong    bool
	afterKey      bool // a key at depth 1 ended; ':' comes next
	keyIsID       bool
	wantValue     bool // after "id": the value comes next
	valKind       byte // '"' while reading a string id, 'n' a number
	val           []byte
	done          bool
	found         any
}

const maxSniffedID = 256

func (s *idSniffer) id() any {
	if !s.done && s.valKind == 'n' {
		s.finishNumber() // the line ended right after the number
	}
	return s.found
}

func (s *idSniffer) feed(b []byte) {
	for _, c := range b {
		if s.done {
			return
		}
		if s.valKind != 0 {
			s.valueByte(c)
			continue
		}
		if s.inStr {
			switch {
			case s.esc:
				s.esc = false
				s.keyByte(c)
			case c == '\\':
				s.esc = true
				s.keyByte(c)
			case c == '"':
				s.inStr = false
				if s.collectingKey {
					s.collectingKey = false
					s.afterKey = true
					s.keyIsID = !s.keyTooLong && string(s.key) == "id"
				}
			default:
				s.keyByte(c)
			}
			continue
		}
		switch c {
		case ' ', '\t', '\r', '\n':
		case '"':
			switch {
			case s.depth == 1 && s.wantValue:
				s.wantValue, s.valKind, s.val = false, '"', s.val[:0]
			case s.depth == 1 && s.expectKey:
				s.inStr, s.collectingKey, s.expectKey = true, true, false
				s.key, s.keyTooLong = s.key[:0], false
			default:
				s.inStr = true
			}
		case ':':
			if s.depth == 1 && s.afterKey {
				s.afterKey = false
				s.wantValue = s.keyIsID
			}
		case ',':
			if s.depth == 1 {
				s.expectKey, s.wantValue = true, false
			}
		case '{', '[':
			if s.depth == 1 {
				s.wantValue = false // an object or array id: not usable
			}
			s.depth++
			if s.depth == 1 && c == '{' {
				s.expectKey = true
			}
		case '}', ']':
			s.depth--
		default:
			if s.depth == 1 && s.wantValue {
				s.wantValue = false
				if c == '-' || (c >= '0' && c <= '9') {
					s.valKind, s.val = 'n', append(s.val[:0], c)
				}
			}
		}
	}
}

func (s *idSniffer) keyByte(c byte) {
	if !s.collectingKey {
		return
	}
	if len(s.key) < 8 {
		s.key = append(s.key, c)
	} else {
		s.keyTooLong = true
	}
}

func (s *idSniffer) valueByte(c byte) {
	if s.valKind == 'n' {
		if (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' {
			s.val = append(s.val, c)
			if len(s.val) > maxSniffedID {
				s.done = true
			}
			return
		}
		s.finishNumber()
		return
	}
	// A string id.
	switch {
	case s.esc:
		s.esc = false
	case c == '\\':
		s.esc = true
	case c == '"':
		var str string
		if json.Unmarshal(append(append([]byte{'"'}, s.val...), '"'), &str) == nil {
			s.found = str
		}
		s.done = true
		return
	}
	s.val = append(s.val, c)
	if len(s.val) > maxSniffedID {
		s.done = true
	}
}

func (s *idSniffer) finishNumber() {
	var f float64
	if json.Unmarshal(s.val, &f) == nil {
		s.found = f
	}
	s.done = true
}
