/**
 * Keep-alive for the HTTPS servers that kube-apiserver (a Go client) and our own clients call.
 *
 * Go's HTTP transport keeps an idle connection for 90 s (client-go's `IdleConnTimeout`) and does
 * not retry a POST that fails on a reused connection. Node closes an idle connection after 5 s
 * by default, so an admission review sent on a connection at the moment Node closes it fails with
 * "write: broken pipe", and the fail-closed webhook rejects the user's request. A server must
 * therefore keep idle connections open longer than its clients do: then the client, never the
 * server, closes them, and it never writes to a connection it is closing.
 */
import type http from 'node:http';

/** client-go's idle timeout for the connections it reuses (webhooks, aggregated APIs, kubelets). */
export const GO_CLIENT_IDLE_MS = 90_000;

/** How long a server keeps an idle keep-alive connection: longer than any client it serves. */
export const SERVER_IDLE_MS = GO_CLIENT_IDLE_MS + 30_000;

/** Let the clients close idle connections (see the module comment); returns the server. */
export function outliveClientIdle<S extends http.Server>(srv: S): S {
  // Only keepAliveTimeout governs an idle connection (headersTimeout starts with a request).
  srv.keepAliveTimeout = SERVER_IDLE_MS;
  return srv;
}
