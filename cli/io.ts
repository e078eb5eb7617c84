/** Where a command reads its environment and writes its output: the process's, unless a caller (a test) gives its own. */
export interface CliIo {
  env: NodeJS.ProcessEnv;
  /** One line (or block) of output; the newline is the writer's. */
  out: (text: string) => void;
  err: (text: string) => void;
  /** Whether stderr is a terminal a person watches (recall's progress goes there). */
  errIsTTY: boolean;
}
