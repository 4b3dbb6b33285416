// What the process driver keeps of a step attempt on disk.

/** File in the run directory where the driver leaves the StepReport until the result is recorded. */
export const REPORT_FILE = "report.json";
