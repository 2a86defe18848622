#include "store_test_util.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace sparcoll::control::test {

std::unique_ptr<StoreServer> start_server(const StoreLimits& limits) {
  std::unique_ptr<StoreServer> server;
  Status st = StoreServer::start("127.0.0.1:0", kToken, &server, limits);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return server;
}

std::string address_of(const StoreServer& server) { return "127.0.0.1:" + std::to_string(server.port()); }

std::unique_ptr<Store> connect_ok(const StoreServer& server, const std::string& who) {
  std::unique_ptr<Store> store;
  Status st = Store::connect(address_of(server), kToken, who, 5000, &store);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return store;
}

std::uint16_t unused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  ::close(fd);
  return ntohs(sa.sin_port);
}

}  // namespace sparcoll::control::test
