// The console's settings, from the environment (docs/console.md lists them).
import { DEFAULT_API_LISTEN, clientTlsFromEnv, envBool, envString, serverTlsFromEnv, type ClientTls, type Env, type ServerTls } from "@ephemera/kit";

export const DEFAULT_CONSOLE_LISTEN = "127.0.0.1:7790";

export interface ConsoleConfig {
  /** EPHEMERA_CONSOLE_LISTEN. */
  listen: string;
  /** EPHEMERA_API: the public API; EPHEMERA_TLS_CA etc.: how it is dialled, as eph dials it. */
  api: string;
  apiTls?: ClientTls;
  /** EPHEMERA_TLS_CERT and EPHEMERA_TLS_KEY, the API's certificate, as the preview gateway serves it; absent: plain HTTP. */
  tls?: ServerTls;
  /** EPHEMERA_CONSOLE_WEB_ROOT: the built page; empty: the package's dist/web. */
  webRoot?: string;
  /** EPHEMERA_API_ALLOW_OPEN. */
  allowOpen: boolean;
}

export function consoleConfig(env: Env): ConsoleConfig {
  const apiTls = clientTlsFromEnv(env);
  const tls = serverTlsFromEnv(env);
  const webRoot = envString(env, "EPHEMERA_CONSOLE_WEB_ROOT", "");
  return {
    listen: envString(env, "EPHEMERA_CONSOLE_LISTEN", DEFAULT_CONSOLE_LISTEN),
    api: envString(env, "EPHEMERA_API", DEFAULT_API_LISTEN),
    ...(apiTls ? { apiTls } : {}),
    ...(tls ? { tls: { cert: tls.cert, key: tls.key } } : {}),
    ...(webRoot ? { webRoot } : {}),
    allowOpen: envBool(env, "EPHEMERA_API_ALLOW_OPEN", false),
  };
}
