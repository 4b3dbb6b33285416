// Where the webhook serves what: the API server posts reviews to MUTATE_PATH.
export const MUTATE_PATH = "/mutate-pods";
export const HEALTH_PATH = "/healthz";
