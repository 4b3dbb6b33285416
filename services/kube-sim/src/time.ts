// Kubernetes timestamps are RFC 3339 to the second.
export const rfc3339 = (ms: number = Date.now()) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z");
