package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// The Nexus service that offers tablefate's calls, and the endpoint that routes it to the
// deployment's task queue (`tablefate dev` makes it).
const (
	nexusEndpoint = "tablefate"
	nexusService  = "tablefate"
)

// This example's own task queue, for its own workflow.
const callersQueue = "go-example-callers"

// NexusResult is what LifecycleThroughNexus answers: the states the table went through, and the
// refusal's type name.
type NexusResult struct {
	ID       int64
	States   []string
	ExpireAt string
	Refused  string
}

// LifecycleThroughNexus is a workflow of the caller's own that makes tablefate's calls as
// operations of the Nexus service: the same names and the same JSON as the workflow types. A write
// is an asynchronous operation (the call's own run) that the workflow waits for; the server gives
// each operation its request id, so a workflow needs no id of its own per request.
func LifecycleThroughNexus(ctx workflow.Context, name string) (NexusResult, error) {
	tables := workflow.NewNexusClient(nexusEndpoint, nexusService)
	op := func(operation string, request any) (TableInfo, error) {
		var answer TableInfo
		options := workflow.NexusOperationOptions{ScheduleToCloseTimeout: time.Hour}
		err := tables.ExecuteOperation(ctx, operation, request, options).Get(ctx, &answer)
		return answer, err
	}
	var result NexusResult

	created, err := op("create", CreateRequest{Table: name, Shards: 2})
	if err != nil {
		return result, err
	}
	result.ID = created.ID
	result.States = append(result.States, created.State)

	// A purge of a live table is refused: the *temporal.NexusOperationError wraps the same
	// *temporal.ApplicationError, type name and all.
	_, err = op("purge", PurgeRequest{TableID: created.ID})
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		return result, fmt.Errorf("purge of a live table: expected a refusal, got %w", err)
	}
	result.Refused = appErr.Type()

	trashed, err := op("trash", TrashRequest{Table: name, RetentionSeconds: 3600})
	if err != nil {
		return result, err
	}
	result.States = append(result.States, trashed.State)
	result.ExpireAt = *trashed.ExpireAt

	purged, err := op("purge", PurgeRequest{TableID: created.ID})
	if err != nil {
		return result, err
	}
	result.States = append(result.States, purged.State)
	return result, nil
}

// throughNexus runs LifecycleThroughNexus on a worker of this process and prints what it answers.
func throughNexus(ctx context.Context, c client.Client) error {
	w := worker.New(c, callersQueue, worker.Options{})
	w.RegisterWorkflow(LifecycleThroughNexus)
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()

	name := "go_example.nexus_" + newRequestID()[:8]
	options := client.StartWorkflowOptions{ID: "go-example-nexus-" + newRequestID(), TaskQueue: callersQueue}
	run, err := c.ExecuteWorkflow(ctx, options, LifecycleThroughNexus, name)
	if err != nil {
		return err
	}
	var result NexusResult
	if err := run.Get(ctx, &result); err != nil {
		return err
	}
	fmt.Printf("%-22s %s id=%d states=%v expireAt=%s purge while READY refused: %s\n",
		"through Nexus", name, result.ID, result.States, result.ExpireAt, result.Refused)
	return nil
}
