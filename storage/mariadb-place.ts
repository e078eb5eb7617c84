/** Where a MariaDB table is: its database and its name (a live table's are its namespace's and its own). */
export interface Place {
  database: string;
  table: string;
}
