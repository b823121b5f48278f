// The TCP store: a Store served over TCP by edtrun's driver (or any process),
// and the client workers use to reach it through EDT_COORDINATOR=host:port.
//
// The server keeps its data in a MemoryStore and answers each client
// connection on its own; waits (get, wait) block only the client that asked.
// A client is one TCP connection; its methods may be called from several
// threads (calls are serialised on the connection). A client whose server is
// gone returns kUnavailable from every call, naming the address.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "edt/store.h"

namespace edt {

struct TcpStoreServerOptions {
  std::string host = "0.0.0.0";  // address to listen on
  uint16_t port = 0;             // 0: pick a free port
};

class TcpStoreServer {
 public:
  // Starts listening and serving on a background thread.
  static Result<std::unique_ptr<TcpStoreServer>> start(const TcpStoreServerOptions& options);
  virtual ~TcpStoreServer() = default;  // stops serving and closes every connection

  virtual uint16_t port() const = 0;
  // The data itself, for the process that hosts the server (no TCP round trip).
  virtual std::shared_ptr<Store> local_store() = 0;
};

// Connects to a TCP store, retrying until `timeout` while the server is not
// up yet.
Result<std::shared_ptr<Store>> connect_tcp_store(const std::string& host, uint16_t port,
                                                 Store::Duration timeout = Store::kDefaultTimeout);

// Parses "host:port" or "[v6addr]:port" (as in EDT_COORDINATOR) and connects.
Result<std::shared_ptr<Store>> connect_tcp_store(const std::string& address,
                                                 Store::Duration timeout = Store::kDefaultTimeout);

}  // namespace edt
