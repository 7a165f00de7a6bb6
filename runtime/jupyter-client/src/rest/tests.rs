use super::*;

#[test]
fn shown_urls_carry_no_credentials() {
    let url = Url::parse("http://alice:pw@127.0.0.1:8888/lab/?token=abc#frag").unwrap();
    assert_eq!(redacted(&url), "http://127.0.0.1:8888/lab/");
}

#[test]
fn a_refused_write_is_not_a_rejected_token() {
    let error = classify_failure(
        &Method::PUT,
        StatusCode::FORBIDDEN,
        r#"{"message": "Permission denied: nb.ipynb", "reason": null}"#,
        Subject::Path("nb.ipynb".into()),
        "http://127.0.0.1:8888/",
        Peer::JupyterServer,
    );
    let text = error.to_string();
    assert!(
        text.contains("Permission denied: nb.ipynb") && !text.contains("token"),
        "{text}"
    );
}

fn classify(method: Method, status: u16, body: &str, subject: Subject) -> RestError {
    classify_failure(
        &method,
        StatusCode::from_u16(status).unwrap(),
        body,
        subject,
        "http://127.0.0.1:8888/",
        Peer::JupyterServer,
    )
}

fn classify_gateway(method: Method, status: u16, body: &str, subject: Subject) -> String {
    classify_failure(
        &method,
        StatusCode::from_u16(status).unwrap(),
        body,
        subject,
        "http://127.0.0.1:8889/",
        Peer::EnterpriseGateway,
    )
    .to_string()
}

#[test]
fn a_gateway_refusing_the_user_says_why_and_not_token() {
    // Enterprise Gateway 3.3.0's answer to root, word for word.
    let text = classify_gateway(
        Method::POST,
        403,
        r#"{"reason": "User 'root' is not authorized to start kernel 'Python 3 (ipykernel)'. Ensure KERNEL_USERNAME is set to an appropriate value and retry the request.", "message": ""}"#,
        Subject::NewKernel(None),
    );
    assert!(
        text.starts_with(
            "Enterprise Gateway at http://127.0.0.1:8889/ refused POST on a new kernel"
        ),
        "{text}"
    );
    assert!(
        text.contains("User 'root' is not authorized") && text.contains("--kernel-env"),
        "{text}"
    );
    assert!(!text.contains("token"), "{text}");
}

#[test]
fn a_kernel_start_failing_in_a_gateway_gives_the_traceback_s_last_line() {
    let text = classify_gateway(
        Method::POST,
        500,
        r#"{"reason": "Internal Server Error", "message": "Unknown server error", "traceback": "Traceback (most recent call last):\n  File \"x.py\", line 1\njupyter_client.kernelspec.NoSuchKernel: No such kernel named nope\n"}"#,
        Subject::Server,
    );
    assert!(
        text.contains(
            "(HTTP 500): jupyter_client.kernelspec.NoSuchKernel: No such kernel named nope"
        ),
        "{text}"
    );
}

#[test]
fn a_refusal_relayed_by_a_jupyter_server_names_its_gateway() {
    let text = classify(
            Method::POST,
            403,
            r#"{"message": "Error from Gateway: [%s] %s. Ensure gateway url is valid and the Gateway instance is running.", "reason": null}"#,
            Subject::Server,
        )
        .to_string();
    assert!(
        text.starts_with("the gateway behind the Jupyter Server at http://127.0.0.1:8888/"),
        "{text}"
    );
    assert!(!text.contains("token") && text.contains("log"), "{text}");
}

#[test]
fn only_authentication_is_about_the_token() {
    let bad_token = classify(
        Method::GET,
        401,
        r#"{"reason": "Unauthorized", "message": ""}"#,
        Subject::Server,
    );
    assert!(
        matches!(bad_token, RestError::TokenRejected { status: 401, .. }),
        "{bad_token}"
    );
    let bare = classify(
        Method::GET,
        403,
        r#"{"message": "Forbidden", "reason": null}"#,
        Subject::Server,
    );
    assert!(
        matches!(bare, RestError::TokenRejected { status: 403, .. }),
        "{bare}"
    );
    let listing = classify_gateway(
        Method::GET,
        403,
        r#"{"reason": "Forbidden", "message": "Forbidden"}"#,
        Subject::Server,
    );
    assert!(
        listing.contains("list_kernels=True") && !listing.contains("Check --jupyter-token"),
        "{listing}"
    );
}

#[test]
fn xsrf_complaint_means_the_token_was_rejected() {
    let err = classify(
        Method::POST,
        403,
        r#"{"message": "'_xsrf' argument missing from POST"}"#,
        Subject::Server,
    );
    assert!(matches!(err, RestError::TokenRejected { .. }), "{err}");
    assert!(err.to_string().contains("JUPYTER_TOKEN"));
}

#[test]
fn unknown_kernel_500_means_not_found() {
    let err = classify(
        Method::POST,
        500,
        r#"{"message": "Kernel does not exist: abc", "reason": null}"#,
        Subject::Kernel("abc".into()),
    );
    assert!(matches!(err, RestError::NotFound { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "kernel 'abc' was not found on the Jupyter Server"
    );
}

#[test]
fn a_real_500_stays_a_server_error() {
    let err = classify(
        Method::POST,
        500,
        r#"{"message": "No such kernel spec named 'nope'"}"#,
        Subject::Server,
    );
    match err {
        RestError::Status {
            status, message, ..
        } => {
            assert_eq!(status, 500);
            assert!(message.contains("kernel spec"));
        }
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn plain_text_404_names_the_path() {
    let err = classify(
        Method::GET,
        404,
        "Not Found",
        Subject::Path("a/b.ipynb".into()),
    );
    assert_eq!(
        err.to_string(),
        "'a/b.ipynb' was not found on the Jupyter Server"
    );
}

#[test]
fn endpoints_keep_base_paths_and_encode_segments() {
    let rest = JupyterRest::new(Url::parse("http://h:1/user/x").unwrap(), None);
    assert_eq!(
        rest.endpoint(&["api", "contents", "dir with space/n#1.ipynb"])
            .unwrap()
            .as_str(),
        "http://h:1/user/x/api/contents/dir%20with%20space/n%231.ipynb"
    );
    assert_eq!(
        rest.kernel_channels_url("k1", "s1").unwrap().as_str(),
        "ws://h:1/user/x/api/kernels/k1/channels?session_id=s1"
    );
    let tls = JupyterRest::new(Url::parse("https://hub/").unwrap(), None);
    assert!(
        tls.kernel_channels_url("k", "s")
            .unwrap()
            .as_str()
            .starts_with("wss://hub/api/")
    );
    for bad in ["..\t", "a/..\n/b", "x\u{85}"] {
        assert!(matches!(
            rest.endpoint(&["api", "contents", bad]),
            Err(RestError::ControlCharacter { .. })
        ));
    }
}
