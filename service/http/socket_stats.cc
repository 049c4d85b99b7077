#include "service/http/socket_stats.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>

namespace dllm {

int64_t TcpBytesReceived(int fd) {
  tcp_info info{};
  socklen_t size = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size) != 0) return -1;
  // An older kernel fills only a prefix of the struct.
  if (size < offsetof(tcp_info, tcpi_bytes_received) + sizeof(info.tcpi_bytes_received)) return -1;
  return static_cast<int64_t>(info.tcpi_bytes_received);
}

}  // namespace dllm
