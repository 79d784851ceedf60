//! Errors in OpenAI's shape (`{"error": {message, type, param, code}}`, with
//! `Retry-After` for a 429), for invalid requests, faults and shutdown alike.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error in OpenAI's shape: `{"error": {message, type, param, code}}`.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
    pub(crate) kind: &'static str,
    pub(crate) param: Option<&'static str>,
    pub(crate) code: Option<&'static str>,
    pub(crate) retry_after: Option<u64>,
}

impl ApiError {
    pub(crate) fn bad_request(message: impl Into<String>, param: Option<&'static str>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param,
            code: None,
            retry_after: None,
        }
    }

    /// The same error about field `to` where it said `from` (a request whose
    /// field is read as another API's: Responses `input` as chat `messages`).
    pub(crate) fn renamed(mut self, from: &str, to: &'static str) -> Self {
        self.message = self.message.replace(&format!("`{from}"), &format!("`{to}"));
        if self.param == Some(from) {
            self.param = Some(to);
        }
        self
    }

    pub(crate) fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            kind,
            param: None,
            code: None,
            retry_after: None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        });
        let mut r = (self.status, axum::Json(body)).into_response();
        if let Some(s) = self.retry_after {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        r
    }
}
