// Command contract-go calls tablefate from Go with nothing but Temporal's Go SDK: each call is the
// workflow type tablefate.v1.<call> on the task queue "tablefate", its one argument the request (a
// JSON object), its result the answer (JSON). It makes a table, trashes it, recalls it, trashes and
// purges it, shows a refusal read by its type name, and then (nexus.go) makes calls from a Go
// workflow through the Nexus endpoint "tablefate".
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
)

// The deployment's task queue (tablefate's default).
const taskQueue = "tablefate"

// The requests, as the contract's JSON has them. tablefate refuses a field it does not know, and a
// null where an optional field is left out, so every optional field is omitempty: its zero value
// is never a valid one, and is left out of the JSON rather than sent as 0 or "".

type CreateRequest struct {
	Table  string `json:"table"`            // "namespace.name"
	Shards int    `json:"shards,omitempty"` // 4 when absent
}

type TrashRequest struct {
	Table               string `json:"table"`
	RetentionSeconds    int    `json:"retentionSeconds,omitempty"` // the deployment's retention when absent
	DrainTimeoutSeconds int    `json:"drainTimeoutSeconds,omitempty"`
}

// UndeleteRequest names the table by its id (an int64) or its name (a string): the contract takes either.
type UndeleteRequest struct {
	Table   any    `json:"table"`
	NewName string `json:"newName,omitempty"` // the name it had when absent
}

type PurgeRequest struct {
	TableID int64 `json:"tableId"`
}

type DescribeRequest struct {
	Table any `json:"table"` // an id or a name
}

// TableInfo is the answer of every table call. Times are RFC 3339 text; a pointer is a field that
// may be null. Decoding into this struct (not a map[string]any) keeps the id an int64, not a float64.
type TableInfo struct {
	ID        int64  `json:"id"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	State     string `json:"state"` // READY, TRASHED, PURGED, or on its way (CREATING, DROPPING, ...)
	Shards    int    `json:"shards"`
	Placement []struct {
		Shard int    `json:"shard"`
		Node  string `json:"node"`
	} `json:"placement"`
	CreatedAt string  `json:"createdAt"`
	DroppedAt *string `json:"droppedAt"`
	ExpireAt  *string `json:"expireAt"`
	PurgedAt  *string `json:"purgedAt"`
	Hold      *struct {
		Reason *string `json:"reason"`
		Since  string  `json:"since"`
	} `json:"hold"`
	Bytes *int64   `json:"bytes,omitempty"` // describe/list with withSizes only
	Notes []string `json:"notes,omitempty"`
}

// call starts the call's run, or joins it, and waits for its answer. The workflow id is the
// caller's, one per request: a retry of the same request (after a timeout, a lost connection, a
// restart of this process) passes the same requestID and gets the same run's answer instead of
// making a second change. USE_EXISTING joins the run while it runs; REJECT_DUPLICATE keeps a closed
// run from being started again, and the SDK then answers with that run's result (as long as the
// namespace keeps the closed run). A refusal is an error that wraps *temporal.ApplicationError.
func call(ctx context.Context, c client.Client, name, requestID string, request any) (TableInfo, error) {
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       "go-example-" + name + "-" + requestID,
		TaskQueue:                taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}, "tablefate.v1."+name, request)
	if err != nil {
		return TableInfo{}, err // the server could not be asked: nothing started
	}
	var answer TableInfo
	err = run.Get(ctx, &answer)
	return answer, err
}

// newRequestID draws a request's id: keep it, and pass it again to retry that request.
func newRequestID() string { return strings.ToLower(rand.Text()) }

func show(what string, t TableInfo) {
	or := func(s *string) string {
		if s == nil {
			return "null"
		}
		return *s
	}
	fmt.Printf("%-22s id=%d %s.%s state=%s shards=%d placement=%v droppedAt=%s expireAt=%s purgedAt=%s\n",
		what, t.ID, t.Namespace, t.Name, t.State, t.Shards, t.Placement, or(t.DroppedAt), or(t.ExpireAt), or(t.PurgedAt))
}

func main() {
	address := os.Getenv("TEMPORAL_ADDRESS")
	if address == "" {
		address = "127.0.0.1:7233"
	}
	c, err := client.Dial(client.Options{
		HostPort:  address,
		Namespace: "default",
		// The SDK's own log, warnings and worse only, so that the answers stand out.
		Logger: tlog.NewStructuredLogger(slog.New(
			slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	})
	if err != nil {
		log.Fatalf("connect to %s: %v", address, err)
	}
	defer c.Close()
	ctx := context.Background()
	must := func(t TableInfo, err error) TableInfo {
		if err != nil {
			log.Fatal(err)
		}
		return t
	}

	// A name of a-z, 0-9 and _ only: rand.Text is base32, lowered.
	name := "go_example.orders_" + newRequestID()[:8]

	created := must(call(ctx, c, "create", newRequestID(), CreateRequest{Table: name, Shards: 2}))
	show("create", created)

	trashID := newRequestID()
	trashed := must(call(ctx, c, "trash", trashID, TrashRequest{Table: name, RetentionSeconds: 3600}))
	show("trash", trashed)
	// The same request again, as a retry would send it: the first run's answer, not a second trash
	// (which would be refused: TableInTrash).
	show("trash (retried)", must(call(ctx, c, "trash", trashID, TrashRequest{Table: name, RetentionSeconds: 3600})))

	show("undelete", must(call(ctx, c, "undelete", newRequestID(), UndeleteRequest{Table: created.ID})))
	show("trash", must(call(ctx, c, "trash", newRequestID(), TrashRequest{Table: name, RetentionSeconds: 3600})))

	// Another table takes the name meanwhile: recalling the first under it is refused, and the
	// refusal's type name says why.
	taker := must(call(ctx, c, "create", newRequestID(), CreateRequest{Table: name, Shards: 1}))
	show("create (same name)", taker)
	_, err = call(ctx, c, "undelete", newRequestID(), UndeleteRequest{Table: created.ID})
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		log.Fatalf("undelete: expected a refusal, got %v", err)
	}
	fmt.Printf("%-22s type=%s nonRetryable=%t message=%q\n",
		"undelete refused", appErr.Type(), appErr.NonRetryable(), appErr.Message())
	// Branch on the type name, never on the message: NameTaken means recall it under a newName, or
	// leave it be.
	if appErr.Type() != "NameTaken" {
		log.Fatalf("undelete: expected NameTaken, got %s", appErr.Type())
	}

	show("purge", must(call(ctx, c, "purge", newRequestID(), PurgeRequest{TableID: created.ID})))
	show("describe", must(call(ctx, c, "describe", newRequestID(), DescribeRequest{Table: created.ID})))
	// Leave nothing live behind: the second table goes to the trash.
	show("trash (same name)",
		must(call(ctx, c, "trash", newRequestID(), TrashRequest{Table: name, RetentionSeconds: 3600})))

	if err := throughNexus(ctx, c); err != nil {
		log.Fatal(err)
	}
}
