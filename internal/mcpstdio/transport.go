// Package mcpstdio is MCP's stdio transport (newline-delimited JSON-RPC)
// for a server that must survive its client. The go-sdk's own stdio
// connection treats a frame it cannot decode (a line of garbage, a request
// whose id is an object, a line over its 16 MiB cap) as the end of the
// connection, so one bad line made `pyexec mcp` exit and killed every job it
// was running. This Connection reads frames itself with a bounded reader,
// answers each bad one with a JSON-RPC error (-32700 parse error, -32600
// invalid request, or a size error naming the limit), and hands only
// well-formed messages to the SDK. Reading never fails except at the end of
// input.
package mcpstdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// batchesUntil is the first protocol revision without JSON-RPC batches.
const batchesUntil = "2025-06-18"

// Transport serves MCP over a reader (the client's requests) and a writer
// (our responses): os.Stdin and os.Stdout for `pyexec mcp`.
type Transport struct {
	Reader io.Reader
	Writer io.Writer
	// MaxFrameBytes bounds one line; longer ones are discarded as they are
	// read (never buffered whole) and answered with an error naming the
	// limit. Required.
	MaxFrameBytes int64
	Logger        *slog.Logger
}

// Connect implements mcp.Transport.
func (t *Transport) Connect(context.Context) (mcp.Connection, error) {
	if t.MaxFrameBytes <= 0 {
		return nil, errors.New("mcpstdio: MaxFrameBytes is required")
	}
	log := t.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &conn{
		w:        t.Writer,
		log:      log,
		limit:    t.MaxFrameBytes,
		incoming: make(chan jsonrpc.Message),
		closed:   make(chan struct{}),
		readDone: make(chan struct{}),
		batches:  map[jsonrpc.ID]*batch{},
	}
	if rc, ok := t.Reader.(io.Closer); ok {
		c.rc = rc
	}
	go c.readLoop(bufio.NewReaderSize(t.Reader, 64<<10))
	return c, nil
}

type conn struct {
	w     io.Writer
	rc    io.Closer
	log   *slog.Logger
	limit int64

	writeMu sync.Mutex // one frame at a time on the writer

	incoming chan jsonrpc.Message
	readErr  error // set before readDone is closed
	readDone chan struct{}

	closeOnce sync.Once
	closed    chan struct{}

	// The protocol version the client asked for in initialize decides
	// whether batches are allowed (they were removed in 2025-06-18).
	mu         sync.Mutex
	noBatches  bool
	batches    map[jsonrpc.ID]*batch // request id -> the batch it arrived in
	sawBatches bool
}

// batch collects the responses of one incoming batch, written together as
// one array once all its requests are answered (JSON-RPC 2.0 batches, for
// clients of revisions before 2025-06-18).
type batch struct {
	pending   int
	responses []*jsonrpc.Response
	index     map[jsonrpc.ID]int
}

func (c *conn) SessionID() string { return "" }

// Read implements mcp.Connection: the next well-formed message.
func (c *conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case m := <-c.incoming:
		return m, nil
	case <-c.readDone:
		return nil, c.readErr
	case <-c.closed:
		return nil, io.EOF
	}
}

// Write implements mcp.Connection.
func (c *conn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if resp, ok := msg.(*jsonrpc.Response); ok {
		if out, inBatch := c.batchResponse(resp); inBatch {
			if out == nil {
				return nil // more responses of its batch to come
			}
			raws := make([]json.RawMessage, len(out))
			for i, r := range out {
				b, err := jsonrpc.EncodeMessage(r)
				if err != nil {
					return fmt.Errorf("encode response: %w", err)
				}
				raws[i] = b
			}
			data, err := json.Marshal(raws)
			if err != nil {
				return err
			}
			return c.writeFrame(data)
		}
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	return c.writeFrame(data)
}

func (c *conn) writeFrame(data []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	select {
	case <-c.closed:
		return mcp.ErrConnectionClosed
	default:
	}
	_, err := c.w.Write(append(data, '\n'))
	return err
}

// Close implements mcp.Connection.
func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		if c.rc != nil {
			_ = c.rc.Close()
		}
	})
	return nil
}

// readLoop reads frames until the input ends, answering bad ones itself.
func (c *conn) readLoop(r *bufio.Reader) {
	defer close(c.readDone)
	for {
		frame, over, err := c.readFrame(r)
		if over != nil {
			c.tooLarge(over)
		} else if len(frame) > 0 {
			c.handleFrame(frame)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				c.readErr = io.EOF
			} else {
				c.readErr = fmt.Errorf("mcpstdio: read: %w", err)
			}
			return
		}
		select {
		case <-c.closed:
			c.readErr = io.EOF
			return
		default:
		}
	}
}

// oversized describes a line past the limit: how long it was and the id
// found in it, if any.
type oversized struct {
	size int64
	id   any
}

// readFrame returns the next non-empty line without its line ending, or,
// for a line over the limit, a description of it (the line itself is
// discarded as it streams by, only its "id" is looked for).
func (c *conn) readFrame(r *bufio.Reader) ([]byte, *oversized, error) {
	var buf []byte
	var sniff *idSniffer
	var size int64
	for {
		chunk, err := r.ReadSlice('\n')
		size += int64(len(chunk))
		if sniff == nil && size > c.limit {
			sniff = &idSniffer{}
			sniff.feed(buf)
			buf = nil
		}
		if sniff != nil {
			sniff.feed(chunk)
		} else {
			buf = append(buf, chunk...)
		}
		switch {
		case err == nil: // a whole line
			if sniff != nil {
				return nil, &oversized{size: size, id: sniff.id()}, nil
			}
			if line := bytes.TrimSpace(buf); len(line) > 0 {
				return line, nil, nil
			}
			buf, size = buf[:0], 0 // blank line: keep reading
		case errors.Is(err, bufio.ErrBufferFull):
			continue // a long line: keep reading it
		default: // end of input (a last line without newline counts)
			if sniff != nil {
				return nil, &oversized{size: size, id: sniff.id()}, err
			}
			return bytes.TrimSpace(buf), nil, err
		}
	}
}

// handleFrame decodes one line and passes its messages on, or answers it.
func (c *conn) handleFrame(frame []byte) {
	if frame[0] == '[' {
		c.handleBatch(frame)
		return
	}
	msg, errResp := decode(frame)
	if errResp != nil {
		c.reply(errResp)
		return
	}
	c.noteInitialize(msg)
	c.deliver(msg)
}

func (c *conn) handleBatch(frame []byte) {
	var raws []json.RawMessage
	if err := json.Unmarshal(frame, &raws); err != nil {
		c.reply(errorResponse(jsonrpc.ID{}, jsonrpc.CodeParseError, "Parse error: the line is not valid JSON (%v); send one JSON-RPC message per line", jsonErr(err)))
		return
	}
	if len(raws) == 0 {
		c.reply(errorResponse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "Invalid request: an empty batch"))
		return
	}
	c.mu.Lock()
	noBatches := c.noBatches
	c.mu.Unlock()
	var msgs []jsonrpc.Message
	var bad []*jsonrpc.Response
	b := &batch{index: map[jsonrpc.ID]int{}}
	for _, raw := range raws {
		msg, errResp := decode(raw)
		if errResp != nil {
			bad = append(bad, errResp)
			continue
		}
		if noBatches {
			if req, ok := msg.(*jsonrpc.Request); ok && req.ID.IsValid() {
				bad = append(bad, errorResponse(req.ID, jsonrpc.CodeInvalidRequest, "Invalid request: JSON-RPC batches are not part of MCP %s and later (the version this session uses); send one message per line", batchesUntil))
			}
			continue
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.ID.IsValid() {
			if _, dup := b.index[req.ID]; dup {
				bad = append(bad, errorResponse(req.ID, jsonrpc.CodeInvalidRequest, "Invalid request: the id %v appears twice in one batch", req.ID.Raw()))
				continue
			}
			b.index[req.ID] = len(b.responses)
			b.responses = append(b.responses, nil)
			b.pending++
		}
		msgs = append(msgs, msg)
	}
	// Errors for the bad entries are answered at once; the good ones'
	// responses go out together when all are in.
	for _, r := range bad {
		c.reply(r)
	}
	if b.pending > 0 {
		c.mu.Lock()
		for id := range b.index {
			if _, busy := c.batches[id]; busy {
				c.mu.Unlock()
				c.reply(errorResponse(id, jsonrpc.CodeInvalidRequest, "Invalid request: id %v is already in use by an unanswered request", id.Raw()))
				return
			}
		}
		for id := range b.index {
			c.batches[id] = b
		}
		c.sawBatches = true
		c.mu.Unlock()
	}
	for _, m := range msgs {
		c.deliver(m)
	}
}

// batchResponse files resp into its batch. It reports whether resp belongs
// to one and, once the batch is complete, returns all its responses.
func (c *conn) batchResponse(resp *jsonrpc.Response) ([]*jsonrpc.Response, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.sawBatches {
		return nil, false
	}
	b, ok := c.batches[resp.ID]
	if !ok {
		return nil, false
	}
	delete(c.batches, resp.ID)
	b.responses[b.index[resp.ID]] = resp
	if b.pending--; b.pending > 0 {
		return nil, true
	}
	return b.responses, true
}

// noteInitialize records the protocol version an initialize asks for.
func (c *conn) noteInitialize(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method != "initialize" {
		return
	}
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(req.Params, &p) == nil {
		c.mu.Lock()
		c.noBatches = p.ProtocolVersion >= batchesUntil
		c.mu.Unlock()
	}
}

func (c *conn) deliver(msg jsonrpc.Message) {
	select {
	case c.incoming <- msg:
	case <-c.closed:
	}
}

// wireReply is an error response as JSON-RPC 2.0 writes it: unlike the
// SDK's encoder, it keeps "id": null when the request's id is unknown.
type wireReply struct {
	JSONRPC string         `json:"jsonrpc"`
	ID      any            `json:"id"`
	Error   *jsonrpc.Error `json:"error"`
}

func (c *conn) reply(resp *jsonrpc.Response) {
	werr, _ := resp.Error.(*jsonrpc.Error)
	data, err := json.Marshal(wireReply{JSONRPC: "2.0", ID: resp.ID.Raw(), Error: werr})
	if err != nil {
		c.log.Error("encoding an error reply", "err", err)
		return
	}
	if err := c.writeFrame(data); err != nil {
		c.log.Warn("writing an error reply", "err", err)
	}
}

func (c *conn) tooLarge(o *oversized) {
	var id jsonrpc.ID
	if o.id != nil {
		id, _ = jsonrpc.MakeID(o.id)
	}
	c.log.Warn("refused an oversized JSON-RPC message", "bytes", o.size, "limit", c.limit, "id", o.id)
	resp := errorResponse(id, jsonrpc.CodeInvalidRequest,
		"Request too large: the message is %s; the largest request this server reads is %s (inline code 1 MiB, stdin 1 MiB, args and env_vars 256 KiB each; see server_info). Put large data in a workspace file and pass its path",
		formatBytes(o.size), formatBytes(c.limit))
	resp.Error.(*jsonrpc.Error).Data = json.RawMessage(fmt.Sprintf(`{"limit_bytes":%d,"size_bytes":%d}`, c.limit, o.size))
	c.reply(resp)
}

// decode turns one JSON value into a message, or into the error response
// that answers it: -32700 for what is not JSON, -32600 for JSON that is not
// a valid JSON-RPC 2.0 message (with the request's id when it has a usable
// one, else null, as JSON-RPC asks).
func decode(raw []byte) (jsonrpc.Message, *jsonrpc.Response) {
	if !json.Valid(raw) {
		var v any
		err := json.Unmarshal(raw, &v)
		return nil, errorResponse(jsonrpc.ID{}, jsonrpc.CodeParseError, "Parse error: the line is not valid JSON (%v); each line must be one JSON-RPC message", jsonErr(err))
	}
	msg, err := jsonrpc.DecodeMessage(raw)
	if err == nil {
		return msg, nil
	}
	var head struct {
		ID any `json:"id"`
	}
	var id jsonrpc.ID
	if json.Unmarshal(raw, &head) == nil && head.ID != nil {
		id, _ = jsonrpc.MakeID(head.ID) // an object or array id stays null
	}
	why := err.Error()
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		why = "a JSON-RPC message must be a JSON object"
	} else if rawID, ok := obj["id"]; ok && !id.IsValid() && !bytes.Equal(bytes.TrimSpace(rawID), []byte("null")) {
		why = "the id must be a string or a number, got " + kindOf(rawID)
	}
	return nil, errorResponse(id, jsonrpc.CodeInvalidRequest, "Invalid request: %s", why)
}

func errorResponse(id jsonrpc.ID, code int64, format string, args ...any) *jsonrpc.Response {
	return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: fmt.Sprintf(format, args...)}}
}

func jsonErr(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v at byte %d", se, se.Offset)
	}
	if err == nil {
		return "invalid JSON"
	}
	return err.Error()
}

func kindOf(raw json.RawMessage) string {
	switch b := bytes.TrimSpace(raw); {
	case len(b) == 0:
		return "nothing"
	case b[0] == '{':
		return "an object"
	case b[0] == '[':
		return "an array"
	case b[0] == 't' || b[0] == 'f':
		return "a boolean"
	}
	return "a value of another type"
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/(1<<20), n)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB (%d bytes)", float64(n)/(1<<10), n)
	}
	return fmt.Sprintf("%d bytes", n)
}
