//! Where requests go: `--url` checked, and vLLM's habits turned into tpscope's
//! base URL (up to the API version) and API — a `--base-url` without a path gets
//! `/v1`, and `--endpoint /v1/chat/completions` says both the path under the base
//! URL and the API.

use tpscope_client::Api;

use super::SpecError;

/// The base URL (`None`: the built-in simulator) and the API, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedTarget {
    /// The base URL up to the API version, without a trailing `/`.
    pub url: Option<String>,
    /// The API.
    pub api: Api,
}

/// Resolves `--url`, `--endpoint` and `--api` together; remarks (a `/v1` added)
/// go to `notes`.
pub fn resolve_target(
    url: Option<&str>,
    endpoint: Option<&str>,
    api: Option<Api>,
    notes: &mut Vec<String>,
) -> Result<ResolvedTarget, SpecError> {
    // A URL pasted with the API's own path (…/v1/chat/completions) is the base
    // URL and that endpoint: it once sent requests to …/chat/completions/chat/completions.
    if let (None, Some(u)) = (endpoint, url) {
        let t = u.trim_end_matches('/');
        // Each API's path, chat's before completions' (its path ends with theirs).
        for suffix in Api::ALL.map(Api::path) {
            if let Some(base) = t.strip_suffix(suffix)
                && base
                    .split_once("://")
                    .is_some_and(|(_, host)| !host.is_empty())
            {
                notes.push(format!(
                    "--url {u} ends with the API's path: read as --url {base} --endpoint {suffix}"
                ));
                return resolve_target(Some(base), Some(suffix), api, notes);
            }
        }
    }
    let by_endpoint = endpoint.map(split_endpoint).transpose()?;
    let api = match (api, &by_endpoint) {
        (Some(a), Some((_, b))) if a != *b => {
            return Err(SpecError::EndpointApi {
                endpoint: endpoint.unwrap_or_default().to_string(),
                api: a.as_str(),
            });
        }
        (Some(a), _) => a,
        (None, Some((_, b))) => *b,
        (None, None) => Api::Chat,
    };
    let Some(u) = url else {
        return Ok(ResolvedTarget { url: None, api });
    };
    let Some(rest) = u
        .strip_prefix("http://")
        .or_else(|| u.strip_prefix("https://"))
    else {
        return Err(SpecError::Url(u.to_string()));
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(SpecError::Url(u.to_string()));
    }
    let base = u.trim_end_matches('/');
    let has_path = rest.trim_end_matches('/').contains('/');
    let url = match &by_endpoint {
        // vLLM sends to base URL + endpoint; tpscope's URL stops before the API's
        // own path, so the endpoint's prefix (`/v1`) joins the base unless already there.
        Some((prefix, _)) if !prefix.is_empty() && !base.ends_with(prefix.as_str()) => {
            format!("{base}{prefix}")
        }
        Some(_) => base.to_string(),
        None if !has_path => {
            notes.push(format!(
                "--url {u} has no path; requests go to {base}/v1 (as vLLM's --base-url does)"
            ));
            format!("{base}/v1")
        }
        None => base.to_string(),
    };
    Ok(ResolvedTarget {
        url: Some(url),
        api,
    })
}

/// `/v1/chat/completions` → (`/v1`, chat): the API of the path (the model's
/// one rule, [`Api::of_path`]) and what comes before its own path.
fn split_endpoint(e: &str) -> Result<(String, Api), SpecError> {
    let t = e.trim().trim_end_matches('/');
    let t = if t.starts_with('/') {
        t.to_string()
    } else {
        format!("/{t}")
    };
    Api::of_path(&t)
        .and_then(|api| Some((t.strip_suffix(api.path())?.to_string(), api)))
        .ok_or_else(|| SpecError::Endpoint(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_ending_in_chat_completions_was_not_understood() {
        for (url, base, api) in [
            (
                "http://h:8000/v1/chat/completions",
                "http://h:8000/v1",
                Api::Chat,
            ),
            (
                "http://h:8000/v1/completions/",
                "http://h:8000/v1",
                Api::Completions,
            ),
            (
                "https://api.example/v1/messages",
                "https://api.example/v1",
                Api::Anthropic,
            ),
            (
                "https://api.example/v1/responses",
                "https://api.example/v1",
                Api::Responses,
            ),
        ] {
            let mut notes = vec![];
            let t = resolve_target(Some(url), None, None, &mut notes).unwrap();
            assert_eq!((t.url.as_deref(), t.api), (Some(base), api), "{url}");
            assert!(notes[0].contains("ends with the API's path"), "{notes:?}");
        }
        let mut notes = vec![];
        let e = resolve_target(
            Some("http://h/v1/chat/completions"),
            None,
            Some(Api::Completions),
            &mut notes,
        );
        assert!(e.is_err());
    }

    fn resolve(url: &str, endpoint: Option<&str>) -> (String, Api, usize) {
        let mut notes = vec![];
        let t = resolve_target(Some(url), endpoint, None, &mut notes).unwrap();
        (t.url.unwrap(), t.api, notes.len())
    }

    #[test]
    fn base_url_without_v1_gets_v1_as_in_vllm() {
        let v1 = "http://h:8000/v1".to_string();
        assert_eq!(resolve("http://h:8000", None), (v1.clone(), Api::Chat, 1));
        assert_eq!(resolve("http://h:8000/", None), (v1.clone(), Api::Chat, 1));
        assert_eq!(resolve("http://h:8000/v1/", None), (v1, Api::Chat, 0));
        // A path of its own is the user's: kept as given.
        assert_eq!(
            resolve("https://h/openai/v2", None),
            ("https://h/openai/v2".into(), Api::Chat, 0)
        );
    }

    #[test]
    fn endpoint_gives_the_path_and_the_api_as_in_vllm() {
        assert_eq!(
            resolve("http://h:8000", Some("/v1/completions")),
            ("http://h:8000/v1".into(), Api::Completions, 0)
        );
        assert_eq!(
            resolve("http://h:8000/v1", Some("/v1/chat/completions")),
            ("http://h:8000/v1".into(), Api::Chat, 0)
        );
        assert_eq!(
            resolve("http://h:8000", Some("chat/completions")),
            ("http://h:8000".into(), Api::Chat, 0)
        );
        assert_eq!(
            resolve("http://h:8000", Some("/v1/messages")),
            ("http://h:8000/v1".into(), Api::Anthropic, 0)
        );
        assert_eq!(
            resolve("http://h:8000", Some("/v1/responses")),
            ("http://h:8000/v1".into(), Api::Responses, 0)
        );
    }

    #[test]
    fn bad_urls_and_endpoints_name_their_flag() {
        let mut n = vec![];
        for (url, endpoint, api, flag) in [
            (Some("ftp://x"), None, None, "--url"),
            (Some("http://"), None, None, "--url"),
            (None, Some("/v1/embeddings"), None, "--endpoint"),
            (None, Some("/v1/completions"), Some(Api::Chat), "--endpoint"),
        ] {
            let e = resolve_target(url, endpoint, api, &mut n).unwrap_err();
            assert!(e.to_string().starts_with(flag), "{e}");
        }
    }
}
