package example;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.annotation.JsonInclude;
import io.temporal.api.enums.v1.WorkflowIdConflictPolicy;
import io.temporal.api.enums.v1.WorkflowIdReusePolicy;
import io.temporal.client.WorkflowClient;
import io.temporal.client.WorkflowClientOptions;
import io.temporal.client.WorkflowExecutionAlreadyStarted;
import io.temporal.client.WorkflowFailedException;
import io.temporal.client.WorkflowOptions;
import io.temporal.client.WorkflowStub;
import io.temporal.failure.ApplicationFailure;
import io.temporal.serviceclient.WorkflowServiceStubs;
import io.temporal.serviceclient.WorkflowServiceStubsOptions;
import java.util.List;
import java.util.Optional;
import java.util.UUID;

/**
 * Calls tablefate from Java with nothing but Temporal's Java SDK: each call is the workflow type
 * {@code tablefate.v1.<call>} on the task queue {@code tablefate}, its one argument the request (a
 * JSON object), its result the answer (JSON). Makes a table, trashes it, recalls it, trashes and
 * purges it, and shows a refusal read by its type name.
 */
public final class TablefateExample {
  /** The deployment's task queue (tablefate's default). */
  private static final String TASK_QUEUE = "tablefate";

  // The requests, as the contract's JSON has them. tablefate refuses a field it does not know, and
  // a null where an optional field is left out: NON_NULL leaves an absent (null) optional field out
  // of the JSON instead of sending null.

  @JsonInclude(JsonInclude.Include.NON_NULL)
  record CreateRequest(String table, Integer shards) {}

  @JsonInclude(JsonInclude.Include.NON_NULL)
  record TrashRequest(String table, Integer retentionSeconds, Integer drainTimeoutSeconds) {}

  /** {@code table}: the table's id (a Long) or its name (a String); the contract takes either. */
  @JsonInclude(JsonInclude.Include.NON_NULL)
  record UndeleteRequest(Object table, String newName) {}

  record PurgeRequest(long tableId) {}

  record DescribeRequest(Object table) {}

  /**
   * The answer of every table call. Times are ISO 8601 text; droppedAt, expireAt, purgedAt and hold
   * may be null. Fields added to the answer later are ignored rather than failing the read.
   */
  @JsonIgnoreProperties(ignoreUnknown = true)
  record TableInfo(
      long id,
      String namespace,
      String name,
      String state,
      int shards,
      List<Placement> placement,
      String createdAt,
      String droppedAt,
      String expireAt,
      String purgedAt,
      Hold hold,
      Long bytes,
      List<String> notes) {}

  record Placement(int shard, String node) {}

  record Hold(String reason, String since) {}

  private final WorkflowClient client;

  TablefateExample(WorkflowClient client) {
    this.client = client;
  }

  /**
   * Starts the call's run, or joins it, and waits for its answer. The workflow id is the caller's,
   * one per request: a retry of the same request (after a timeout, a lost connection, a restart of
   * this process) passes the same requestId and gets the same run's answer instead of making a
   * second change. USE_EXISTING joins the run while it runs; REJECT_DUPLICATE keeps a closed run
   * from being started again, and its result is then read by the workflow id (as long as the
   * namespace keeps the closed run). A refusal throws WorkflowFailedException, its cause an
   * ApplicationFailure.
   */
  TableInfo call(String name, String requestId, Object request) {
    String workflowType = "tablefate.v1." + name;
    String workflowId = "java-example-" + name + "-" + requestId;
    WorkflowOptions options =
        WorkflowOptions.newBuilder()
            .setWorkflowId(workflowId)
            .setTaskQueue(TASK_QUEUE)
            .setWorkflowIdConflictPolicy(
                WorkflowIdConflictPolicy.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING)
            .setWorkflowIdReusePolicy(
                WorkflowIdReusePolicy.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE)
            .build();
    WorkflowStub stub = client.newUntypedWorkflowStub(workflowType, options);
    try {
      stub.start(request);
    } catch (WorkflowExecutionAlreadyStarted closed) {
      // The same request ran already and is closed: its answer (or its failure) is that run's.
      stub = client.newUntypedWorkflowStub(workflowId, Optional.empty(), Optional.of(workflowType));
    }
    return stub.getResult(TableInfo.class);
  }

  /** A request's id: keep it, and pass it again to retry that request. */
  static String newRequestId() {
    return UUID.randomUUID().toString();
  }

  static void show(String what, TableInfo t) {
    System.out.printf(
        "%-22s id=%d %s.%s state=%s shards=%d placement=%s droppedAt=%s expireAt=%s purgedAt=%s%n",
        what,
        t.id(),
        t.namespace(),
        t.name(),
        t.state(),
        t.shards(),
        t.placement(),
        t.droppedAt(),
        t.expireAt(),
        t.purgedAt());
  }

  void run() {
    // A name of a-z, 0-9 and _ only.
    String name = "java_example.orders_" + newRequestId().substring(0, 8).replace('-', '_');

    TableInfo created = call("create", newRequestId(), new CreateRequest(name, 2));
    show("create", created);

    String trashId = newRequestId();
    show("trash", call("trash", trashId, new TrashRequest(name, 3600, null)));
    // The same request again, as a retry would send it: the first run's answer, not a second trash
    // (which would be refused: TableInTrash).
    show("trash (retried)", call("trash", trashId, new TrashRequest(name, 3600, null)));

    show("undelete", call("undelete", newRequestId(), new UndeleteRequest(created.id(), null)));
    show("trash", call("trash", newRequestId(), new TrashRequest(name, 3600, null)));

    // Another table takes the name meanwhile: recalling the first under it is refused, and the
    // refusal's type name says why.
    TableInfo taker = call("create", newRequestId(), new CreateRequest(name, 1));
    show("create (same name)", taker);
    try {
      call("undelete", newRequestId(), new UndeleteRequest(created.id(), null));
      throw new IllegalStateException("undelete: expected a refusal");
    } catch (WorkflowFailedException e) {
      if (!(e.getCause() instanceof ApplicationFailure failure)) {
        throw e;
      }
      System.out.printf(
          "%-22s type=%s nonRetryable=%s message=\"%s\"%n",
          "undelete refused",
          failure.getType(),
          failure.isNonRetryable(),
          failure.getOriginalMessage());
      // Branch on the type name, never on the message: NameTaken means recall it under a newName,
      // or leave it be.
      if (!"NameTaken".equals(failure.getType())) {
        throw e;
      }
    }

    show("purge", call("purge", newRequestId(), new PurgeRequest(created.id())));
    show("describe", call("describe", newRequestId(), new DescribeRequest(created.id())));
    // Leave nothing live behind: the second table goes to the trash.
    show("trash (same name)", call("trash", newRequestId(), new TrashRequest(name, 3600, null)));
  }

  public static void main(String[] args) {
    String address =
        Optional.ofNullable(System.getenv("TEMPORAL_ADDRESS")).orElse("127.0.0.1:7233");
    WorkflowServiceStubs service =
        WorkflowServiceStubs.newServiceStubs(
            WorkflowServiceStubsOptions.newBuilder().setTarget(address).build());
    try {
      WorkflowClient client =
          WorkflowClient.newInstance(
              service, WorkflowClientOptions.newBuilder().setNamespace("default").build());
      new TablefateExample(client).run();
    } finally {
      service.shutdown();
    }
  }
}
