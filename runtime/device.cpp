// Device and DeviceBuffer: thin, checked forwards to the Driver.
#include <utility>

#include "runtime/driver.h"
#include "runtime/runtime.h"

namespace mxfp6::rt {

const char* platformName(Platform platform) {
  switch (platform) {
    case Platform::Auto: return "auto";
    case Platform::Cuda: return "cuda";
    case Platform::Hip: return "hip";
  }
  return "unknown";
}

Expected<Platform> parsePlatform(std::string_view name) {
  if (name.empty() || name == "auto") return Platform::Auto;
  if (name == "cuda") return Platform::Cuda;
  if (name == "hip") return Platform::Hip;
  return Status::error("unknown GPU platform '" + std::string(name) +
                       "' (expected auto, cuda or hip)");
}

DeviceBuffer::DeviceBuffer(std::shared_ptr<Driver> driver, void* data, size_t size)
    : driver_(std::move(driver)), data_(data), size_(size) {}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : driver_(std::move(other.driver_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) driver_->free(data_);
    driver_ = std::move(other.driver_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  // A destructor cannot report; a failing free means the context is already broken, and that
  // error surfaces at the caller's next synchronize.
  if (data_ != nullptr) driver_->free(data_);
}

void* DeviceBuffer::release() {
  size_ = 0;
  return std::exchange(data_, nullptr);
}

Device::Device(std::shared_ptr<Driver> driver) : driver_(std::move(driver)) {}
Device::~Device() = default;

Expected<std::unique_ptr<Device>> Device::open(const DeviceOptions& options) {
  ASSIGN_OR_RETURN(std::shared_ptr<Driver> driver, openDriver(options));
  return std::unique_ptr<Device>(new Device(std::move(driver)));
}

const std::string& Device::name() const { return driver_->deviceName(); }
Platform Device::platform() const { return driver_->platform(); }
const std::string& Device::arch() const { return driver_->arch(); }
bool Device::overlapsLaunches() const { return driver_->overlapsLaunches(); }
const std::string& Device::driverPath() const { return driver_->libraryPath(); }
int Device::ordinal() const { return driver_->ordinal(); }
int Device::deviceCount() const { return driver_->deviceCount(); }

Expected<DeviceBuffer> Device::allocate(size_t bytes) {
  // The drivers reject 0-byte allocations; an empty tensor should still get a buffer.
  if (bytes == 0) return DeviceBuffer();
  auto data = driver_->allocate(bytes);
  if (!data.isOk())
    return Status::error("allocating " + std::to_string(bytes) + " bytes: " +
                         data.status().message());
  return DeviceBuffer(driver_, *data, bytes);
}

Status Device::free(void* deviceMemory) {
  if (deviceMemory == nullptr) return Status::ok();
  return driver_->free(deviceMemory);
}

Status Device::copyToDevice(void* deviceDst, const void* hostSrc, size_t bytes) {
  if (bytes == 0) return Status::ok();
  return driver_->copyToDevice(deviceDst, hostSrc, bytes);
}

Status Device::copyToHost(void* hostDst, const void* deviceSrc, size_t bytes) {
  if (bytes == 0) return Status::ok();
  return driver_->copyToHost(hostDst, deviceSrc, bytes);
}

Status Device::memset(void* deviceDst, uint8_t value, size_t bytes) {
  if (bytes == 0) return Status::ok();
  return driver_->memset(deviceDst, value, bytes);
}

Status Device::synchronize(void* stream) { return driver_->synchronize(stream); }

Expected<Event> Event::create(Device& device) {
  ASSIGN_OR_RETURN(void* event, device.driver_->createEvent());
  return Event(device.driver_, event);
}

Event::Event(Event&& other) noexcept
    : driver_(std::move(other.driver_)), event_(std::exchange(other.event_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_) (void)driver_->destroyEvent(event_);
    driver_ = std::move(other.driver_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

Event::~Event() {
  if (event_) (void)driver_->destroyEvent(event_);
}

Status Event::record(void* stream) { return driver_->recordEvent(event_, stream); }

Expected<float> Event::elapsedMs(const Event& start, const Event& end) {
  return start.driver_->elapsedMs(start.event_, end.event_);
}

}  // namespace mxfp6::rt
