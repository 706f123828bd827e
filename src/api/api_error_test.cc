#include "api/api_error.h"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace kvroute::api {
namespace {

TEST(ApiError, ToJsonNestsTheFourOpenAiKeysUnderError) {
  const ApiError e = ApiError::InvalidRequest("bad n", "n");
  const boost::json::object j = e.ToJson();
  ASSERT_EQ(j.size(), 1u);
  const auto& inner = j.at("error").as_object();
  ASSERT_EQ(inner.size(), 4u);
  EXPECT_EQ(inner.at("message").as_string(), "bad n");
  EXPECT_EQ(inner.at("type").as_string(), "invalid_request_error");
  EXPECT_EQ(inner.at("param").as_string(), "n");
  EXPECT_TRUE(inner.at("code").is_null());
  EXPECT_EQ(e.status, 400);
}

TEST(ApiError, EmptyParamSerializesAsNull) {
  const auto j = ApiError::InvalidRequest("x").ToJson();
  EXPECT_TRUE(j.at("error").at("param").is_null());
}

TEST(ApiError, KeyOrderIsMessageTypeParamCode) {
  EXPECT_EQ(ApiError::InvalidRequest("m", "p").Body(),
            R"({"error":{"message":"m","type":"invalid_request_error","param":"p","code":null}})");
}

TEST(ApiError, ModelNotFoundIs404WithModelNotFoundCode) {
  const ApiError e = ApiError::ModelNotFound("llama");
  EXPECT_EQ(e.status, 404);
  EXPECT_EQ(e.code, "model_not_found");
  EXPECT_EQ(e.param, "model");
  EXPECT_EQ(e.message, "The model `llama` does not exist.");
}

TEST(ApiError, StatusesOfTheOtherFactories) {
  EXPECT_EQ(ApiError::BodyTooLarge(1024).status, 413);
  EXPECT_NE(ApiError::BodyTooLarge(1024).message.find("1024"), std::string::npos);
  EXPECT_EQ(ApiError::InvalidApiKey().status, 401);
  EXPECT_EQ(ApiError::InvalidApiKey().code, "invalid_api_key");
  EXPECT_EQ(ApiError::Overloaded().status, 503);
  EXPECT_EQ(ApiError::ShuttingDown().status, 503);
  EXPECT_EQ(ApiError::Internal().status, 500);
  EXPECT_EQ(ApiError::Internal().type, "server_error");
  EXPECT_EQ(ApiError::NotFound("/x").status, 404);
  EXPECT_EQ(ApiError::MethodNotAllowed("GET").status, 405);
}

TEST(ApiError, VllmShapeUsesClassNameTypeAndIntegerCode) {
  const auto j = ApiError::ModelNotFound("m").ToVllmJson();
  const auto& inner = j.at("error").as_object();
  EXPECT_EQ(inner.at("type").as_string(), "NotFoundError");
  EXPECT_EQ(inner.at("code").as_int64(), 404);
  EXPECT_EQ(inner.at("param").as_string(), "model");
}

TEST(ApiError, VllmErrorTypeByStatus) {
  EXPECT_EQ(VllmErrorType(400), "BadRequestError");
  EXPECT_EQ(VllmErrorType(404), "NotFoundError");
  EXPECT_EQ(VllmErrorType(500), "InternalServerError");
  EXPECT_EQ(VllmErrorType(503), "ServiceUnavailableError");
}

}  // namespace
}  // namespace kvroute::api
