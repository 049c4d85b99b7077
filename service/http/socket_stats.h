// What the kernel knows of a TCP connection, for the HTTP server's slow-
// client defences. Apart from http_server.cc because <linux/tcp.h> (the
// kernel's struct tcp_info, with the byte counters) and glibc's
// <netinet/tcp.h> (which Asio includes) cannot share a translation unit.
#ifndef DLLM_SERVICE_HTTP_SOCKET_STATS_H_
#define DLLM_SERVICE_HTTP_SOCKET_STATS_H_

#include <cstdint>

namespace dllm {

// The bytes received on TCP socket `fd` since it was opened (TLS records
// included), or -1 when the kernel does not say (not a TCP socket, closed,
// or a kernel before 4.1).
int64_t TcpBytesReceived(int fd);

}  // namespace dllm

#endif  // DLLM_SERVICE_HTTP_SOCKET_STATS_H_
