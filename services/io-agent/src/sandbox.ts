// How a step's script is confined beyond its mount namespace: the user it runs as, the size
// of its private writable filesystems, a read-only host. The process driver passes them to
// ephemera-launch.

export interface StepSandbox {
  /** The script runs as this user and group (the launcher stays root); absent = the runner's own. */
  uid?: number;
  gid?: number;
  /** Every private view (and /tmp) is a tmpfs of this many bytes; absent = bind-mounted run-directory views, no quota. */
  tmpSizeBytes?: number;
  /** Every other mount of the step's namespace is read-only while the script runs. */
  readOnlyHost?: boolean;
}
