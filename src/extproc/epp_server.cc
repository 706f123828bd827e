#include "extproc/epp_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "envoy/service/ext_proc/v3/external_processor.grpc.pb.h"

namespace kvroute::extproc {
namespace {

constexpr const char* kExtProcService = "envoy.service.ext_proc.v3.ExternalProcessor";

class Service final : public pb::ExternalProcessor::Service {
 public:
  Service(SessionFactory sessions, std::size_t max_body)
      : sessions_(std::move(sessions)), max_body_(max_body) {}

  grpc::Status Process(grpc::ServerContext* context,
                       grpc::ServerReaderWriter<pb::ProcessingResponse, pb::ProcessingRequest>* stream) override {
    EppStream epp(sessions_(), max_body_);
    pb::ProcessingRequest request;
    while (!context->IsCancelled() && stream->Read(&request)) {
      bool ok = true;
      for (const auto& response : epp.OnMessage(request)) {
        if (ok && !stream->Write(response)) ok = false;
      }
      epp.MarkSent(ok);
      if (!ok) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "gateway gone");  // ~EppStream: End()
      if (epp.finished()) break;  // an ImmediateResponse ends this request's processing
    }
    epp.End();
    return grpc::Status::OK;
  }

 private:
  SessionFactory sessions_;
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
  return Start(options, [picker = std::move(picker)]() -> std::unique_ptr<PickSession> {
    struct Adapter final : PickSession {
      explicit Adapter(Picker p) : picker(std::move(p)) {}
      PickResult Pick(const PickRequest& r) override { return picker(r); }
      Picker picker;
    };
    return std::make_unique<Adapter>(picker);
  });
}

std::expected<std::unique_ptr<EppServer>, std::string> EppServer::Start(const EppServerOptions& options,
                                                                        SessionFactory sessions) {
  auto impl = std::make_unique<Impl>();
  impl->service = std::make_unique<Service>(std::move(sessions), options.max_body_bytes);
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
