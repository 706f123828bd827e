#include "extproc/epp_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "envoy/service/ext_proc/v3/external_processor.grpc.pb.h"

namespace kvroute::extproc {
namespace {

constexpr const char* kExtProcService = "envoy.service.ext_proc.v3.ExternalProcessor";

class Service final : public pb::ExternalProcessor::Service {
 public:
  Service(Picker picker, std::size_t max_body) : picker_(std::move(picker)), max_body_(max_body) {}

  grpc::Status Process(grpc::ServerContext* context,
                       grpc::ServerReaderWriter<pb::ProcessingResponse, pb::ProcessingRequest>* stream) override {
    EppStream epp(picker_, max_body_);
    pb::ProcessingRequest request;
    while (!context->IsCancelled() && stream->Read(&request)) {
      for (const auto& response : epp.OnMessage(request)) {
        if (!stream->Write(response)) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "gateway gone");
      }
      if (epp.finished()) break;  // an ImmediateResponse ends this request's processing
    }
    return grpc::Status::OK;
  }

 private:
  Picker picker_;
  std::size_t max_body_;
};

}  // namespace

struct EppServer::Impl {
  std::unique_ptr<Service> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

EppServer::EppServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

EppServer::~EppServer() { Shutdown(std::chrono::milliseconds(0)); }

std::expected<std::unique_ptr<EppServer>, std::string> EppServer::Start(const EppServerOptions& options,
                                                                        Picker picker) {
  auto impl = std::make_unique<Impl>();
  impl->service = std::make_unique<Service>(std::move(picker), options.max_body_bytes);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.address, grpc::InsecureServerCredentials(), &impl->port);
  builder.RegisterService(impl->service.get());
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->port == 0) {
    return std::unexpected("ext_proc server: cannot listen on " + options.address);
  }
  auto* health = impl->server->GetHealthCheckService();
  health->SetServingStatus("liveness", true);
  health->SetServingStatus("readiness", true);
  health->SetServingStatus(kExtProcService, true);
  return std::unique_ptr<EppServer>(new EppServer(std::move(impl)));
}

int EppServer::port() const { return impl_->port; }

void EppServer::SetReady(bool ready) {
  if (!impl_->server) return;
  impl_->server->GetHealthCheckService()->SetServingStatus("readiness", ready);
  impl_->server->GetHealthCheckService()->SetServingStatus(kExtProcService, ready);
}

void EppServer::Shutdown(std::chrono::milliseconds grace) {
  if (!impl_->server) return;
  SetReady(false);
  impl_->server->Shutdown(std::chrono::system_clock::now() + grace);
  impl_->server->Wait();
  impl_->server.reset();
}

}  // namespace kvroute::extproc
