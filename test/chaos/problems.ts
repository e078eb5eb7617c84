/** One broken invariant, with enough detail to find it: ids, states, workflow ids, messages. */
export interface Problem {
  /** Which rule: locks, states, files, checksums, expiry, workflows, answers, convergence, worker. */
  invariant: string;
  detail: string;
}
