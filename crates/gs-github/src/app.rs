//! A GitHub App's credentials: the JWT it signs with its private key (RS256, as GitHub asks:
//! issued a minute in the past, valid for nine minutes, issuer the app's id), which buys an
//! installation token for an hour. The key is read from the file the user names and never
//! leaves this process.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

/// The RSA key in `pem` (PKCS#1 `RSA PRIVATE KEY`, as GitHub hands it out, or PKCS#8).
fn key_pair(pem: &str) -> Result<ring::rsa::KeyPair, String> {
    let body: String = pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .map(str::trim)
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body.as_bytes())
        .map_err(|e| format!("the app's private key is not PEM ({e})"))?;
    ring::rsa::KeyPair::from_der(&der)
        .or_else(|_| ring::rsa::KeyPair::from_pkcs8(&der))
        .map_err(|e| format!("the app's private key is not an RSA key ({e})"))
}

/// The JWT that authenticates as the app `app_id` at `now` (seconds since the epoch).
pub fn jwt(app_id: u64, key_pem: &str, now: u64) -> Result<String, String> {
    let key = key_pair(key_pem)?;
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
    let claims = serde_json::json!({
        "iat": now.saturating_sub(60),
        "exp": now + 540,
        "iss": app_id.to_string(),
    });
    let payload = URL_SAFE_NO_PAD.encode(claims.to_string().as_bytes());
    let signed = format!("{header}.{payload}");
    let mut sig = vec![0; key.public().modulus_len()];
    key.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        signed.as_bytes(),
        &mut sig,
    )
    .map_err(|e| format!("cannot sign with the app's private key ({e})"))?;
    Ok(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(&sig)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_key_that_is_not_one_is_named() {
        let e = super::jwt(
            1,
            "-----BEGIN RSA PRIVATE KEY-----\nnot base64!\n-----END RSA PRIVATE KEY-----\n",
            0,
        )
        .unwrap_err();
        assert!(e.contains("not PEM"), "{e}");
        let e = super::jwt(
            1,
            "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n",
            0,
        )
        .unwrap_err();
        assert!(e.contains("not an RSA key"), "{e}");
    }
}
