// gonode: a JSON-RPC node that reads requests the way go-ethereum does, for the tests
// of "one reading" (tests/one_reading.rs): what a Go node (geth, erigon, bor) executes
// must be what the edge checked.
//
// It decodes with encoding/json into go-ethereum's own request shapes (rpc/json.go's
// jsonrpcMessage; positional params into internal/ethapi's TransactionArgs and
// eth/filters' FilterCriteria input), so it matches object keys case-insensitively,
// with Unicode folding, last match winning, as those nodes do. It records every call it
// executes, as it decoded it, and serves the record at GET /executed. Health checks
// (X-Request-Id: chainedge-health-check) are answered, not recorded.
//
// Answers depend on what was decoded, so a call the node read differently is visible
// in its answer too: eth_getBalance answers 0x1 followed by the address's last four hex
// digits; eth_call answers the `to` it called; eth_getLogs one log per decoded address.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
)

// go-ethereum rpc/json.go
type jsonrpcMessage struct {
	Version string          `json:"jsonrpc,omitempty"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Error   *jsonError      `json:"error,omitempty"`
	Result  interface{}     `json:"result,omitempty"`
}

type jsonError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// go-ethereum internal/ethapi/transaction_args.go (the members these tests read)
type transactionArgs struct {
	From  *string `json:"from"`
	To    *string `json:"to"`
	Data  *string `json:"data"`
	Input *string `json:"input"`
}

// go-ethereum eth/filters/api.go, FilterCriteria.UnmarshalJSON's input
type filterInput struct {
	BlockHash *string       `json:"blockHash"`
	FromBlock *string       `json:"fromBlock"`
	ToBlock   *string       `json:"toBlock"`
	Addresses interface{}   `json:"address"`
	Topics    []interface{} `json:"topics"`
}

type executed struct {
	Method string        `json:"method"`
	Args   []interface{} `json:"args"`
}

var (
	mu  sync.Mutex
	ran = []executed{}
)

// positional decodes params as go-ethereum's parsePositionalArguments does: an array,
// each element into the next argument's type, missing trailing ones left nil.
func positional(params json.RawMessage, args ...interface{}) error {
	if len(params) == 0 || string(params) == "null" {
		return nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(params, &raw); err != nil {
		return fmt.Errorf("non-array args")
	}
	if len(raw) > len(args) {
		return fmt.Errorf("too many arguments, want at most %d", len(args))
	}
	for i, r := range raw {
		if err := json.Unmarshal(r, args[i]); err != nil {
			return fmt.Errorf("invalid argument %d: %v", i, err)
		}
	}
	return nil
}

func addresses(v interface{}) []string {
	switch a := v.(type) {
	case string:
		return []string{a}
	case []interface{}:
		out := []string{}
		for _, x := range a {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return []string{}
}

func deref(s *string) interface{} {
	if s == nil {
		return nil
	}
	return *s
}

// execute runs one call as the node read it: its answer, and what it records.
func execute(m *jsonrpcMessage) (interface{}, *jsonError, []interface{}) {
	switch m.Method {
	case "eth_chainId":
		return "0x1", nil, nil
	case "net_version":
		return "1", nil, nil
	case "eth_blockNumber":
		return "0x10", nil, nil
	case "eth_syncing":
		return false, nil, nil
	case "eth_getBalance":
		var addr, block string
		if err := positional(m.Params, &addr, &block); err != nil {
			return nil, &jsonError{-32602, err.Error()}, nil
		}
		tail := strings.TrimPrefix(strings.ToLower(addr), "0x")
		if len(tail) > 4 {
			tail = tail[len(tail)-4:]
		}
		return "0x1" + tail, nil, []interface{}{addr, block}
	case "eth_call", "eth_estimateGas":
		var tx transactionArgs
		var block interface{}
		if err := positional(m.Params, &tx, &block); err != nil {
			return nil, &jsonError{-32602, err.Error()}, nil
		}
		args := []interface{}{map[string]interface{}{"from": deref(tx.From), "to": deref(tx.To), "data": deref(tx.Data), "input": deref(tx.Input)}, block}
		if tx.To == nil {
			return "0x", nil, args
		}
		return "0x" + strings.TrimPrefix(*tx.To, "0x"), nil, args
	case "eth_getLogs":
		var f filterInput
		if err := positional(m.Params, &f); err != nil {
			return nil, &jsonError{-32602, err.Error()}, nil
		}
		addrs := addresses(f.Addresses)
		args := []interface{}{map[string]interface{}{"address": addrs, "fromBlock": deref(f.FromBlock), "toBlock": deref(f.ToBlock), "blockHash": deref(f.BlockHash)}}
		logs := []interface{}{}
		for i, a := range addrs {
			logs = append(logs, map[string]interface{}{
				"address": a, "topics": []string{}, "data": "0x", "blockNumber": "0x10",
				"blockHash": "0x" + strings.Repeat("ab", 32), "transactionHash": "0x" + strings.Repeat("cd", 32),
				"transactionIndex": "0x0", "logIndex": fmt.Sprintf("0x%x", i), "removed": false,
			})
		}
		return logs, nil, args
	}
	var params interface{}
	_ = json.Unmarshal(m.Params, &params)
	return nil, nil, []interface{}{params}
}

func answer(m *jsonrpcMessage, record bool) *jsonrpcMessage {
	out := &jsonrpcMessage{Version: "2.0", ID: m.ID}
	if out.ID == nil {
		out.ID = json.RawMessage("null")
	}
	result, err, args := execute(m)
	if err != nil {
		out.Error = err
		return out
	}
	if record {
		mu.Lock()
		ran = append(ran, executed{m.Method, args})
		mu.Unlock()
	}
	if result == nil {
		result = json.RawMessage("null")
	}
	out.Result = result
	return out
}

func serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == "GET" && r.URL.Path == "/executed" {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ran)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		w.WriteHeader(400)
		return
	}
	record := r.Header.Get("X-Request-Id") != "chainedge-health-check"
	w.Header().Set("Content-Type", "application/json")
	trimmed := strings.TrimLeft(string(body), " \t\r\n")
	if strings.HasPrefix(trimmed, "[") {
		var batch []*jsonrpcMessage
		if err := json.Unmarshal(body, &batch); err != nil {
			_ = json.NewEncoder(w).Encode(&jsonrpcMessage{Version: "2.0", ID: json.RawMessage("null"), Error: &jsonError{-32700, err.Error()}})
			return
		}
		out := []*jsonrpcMessage{}
		for _, m := range batch {
			out = append(out, answer(m, record))
		}
		_ = json.NewEncoder(w).Encode(out)
		return
	}
	var m jsonrpcMessage
	if err := json.Unmarshal(body, &m); err != nil {
		_ = json.NewEncoder(w).Encode(&jsonrpcMessage{Version: "2.0", ID: json.RawMessage("null"), Error: &jsonError{-32700, err.Error()}})
		return
	}
	_ = json.NewEncoder(w).Encode(answer(&m, record))
}

func main() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening %d\n", l.Addr().(*net.TCPAddr).Port)
	_ = http.Serve(l, http.HandlerFunc(serve))
}
