// SharedDescriptor: memory a stream shares with its client through a file
// descriptor that the descriptor socket hands over (FdServer): an shm
// ring's memfd, a cuda_ipc ring's exported VMM handle.
#ifndef STOKER_SERVER_TRANSPORT_SHARED_DESCRIPTOR_H_
#define STOKER_SERVER_TRANSPORT_SHARED_DESCRIPTOR_H_

namespace stoker::transport {

class SharedDescriptor {
 public:
  virtual ~SharedDescriptor() = default;
  // The descriptor; the holder keeps owning it (the server sends a copy).
  virtual int fd() const = 0;
  // The client has received it.
  virtual void MarkHandedOver() = 0;
};

}  // namespace stoker::transport

#endif  // STOKER_SERVER_TRANSPORT_SHARED_DESCRIPTOR_H_
