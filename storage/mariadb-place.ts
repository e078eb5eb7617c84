/** Where a MariaDB table is: its database and its name (a live table's are its namespace's and its own). */
export interface Place {
  database: string;
  table: string;
}

/** How a table's name begins while a move has it hidden in its live database (mariadb-record.ts's hiddenName). */
export const HIDDEN_PREFIX = 'tablefate_moving_';
