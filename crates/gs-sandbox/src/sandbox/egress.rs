//! The run's TLS trust when it may reach the network: the system's store and the user's CA
//! files as one bundle, and the variables that point its clients at it. Its way out is
//! `gs_egress::door`.

/// The system's trust store and the user's CA files as one PEM bundle in `dir` (named by its
/// content, written once, readable by the runs: certificates are public), for the run's TLS
/// clients; the error names the file and what is wrong with it.
pub fn ca_bundle(
    dir: &std::path::Path,
    files: &[std::path::PathBuf],
) -> Result<std::path::PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    const SYSTEM: &[&str] = &[
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/cert.pem",
    ];
    const MAX: u64 = 1 << 20;
    let mut pem = SYSTEM
        .iter()
        .find_map(|p| std::fs::read(p).ok())
        .unwrap_or_default();
    for f in files {
        let text = std::fs::File::open(f)
            .and_then(|file| {
                let mut b = Vec::new();
                std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX + 1), &mut b)?;
                Ok(b)
            })
            .map_err(|e| format!("cannot read {}: {e}", f.display()))?;
        if text.len() as u64 > MAX {
            return Err(format!("{} is over 1 MiB: not a CA file", f.display()));
        }
        if !text
            .windows(27)
            .any(|w| w == b"-----BEGIN CERTIFICATE-----")
        {
            return Err(format!(
                "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                f.display()
            ));
        }
        pem.push(b'\n');
        pem.extend_from_slice(&text);
    }
    let path = dir.join(format!("bundle-{}.pem", gs_util::fnv64_hex(&pem)));
    if path.is_file() {
        return Ok(path);
    }
    let io = |e: std::io::Error| format!("cannot write the CA bundle in {}: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(io)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).map_err(io)?;
    let tmp = dir.join(format!(".bundle-{}.tmp", std::process::id()));
    std::fs::write(&tmp, &pem).map_err(io)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)?;
    Ok(path)
}

/// The variables that point the run's TLS clients (OpenSSL, curl, git, Python's requests and
/// pip, Node, cargo) at a CA bundle.
pub fn ca_env(bundle: &std::path::Path) -> Vec<(String, String)> {
    let b = bundle.display().to_string();
    [
        "SSL_CERT_FILE",
        "CURL_CA_BUNDLE",
        "GIT_SSL_CAINFO",
        "REQUESTS_CA_BUNDLE",
        "PIP_CERT",
        "NODE_EXTRA_CA_CERTS",
        "CARGO_HTTP_CAINFO",
    ]
    .iter()
    .map(|k| (k.to_string(), b.clone()))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_bundle_joins_the_users_certificates_and_names_a_bad_file() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let pem = d.path().join("corp.pem");
        std::fs::write(
            &pem,
            "-----BEGIN CERTIFICATE-----\nCORP\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let out = d.path().join("ca");
        let b = ca_bundle(&out, std::slice::from_ref(&pem)).unwrap();
        assert!(std::fs::read_to_string(&b).unwrap().contains("CORP"));
        let mode = std::fs::metadata(&b).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644, "the runs' uids read it");
        assert_eq!(
            ca_bundle(&out, &[pem]).unwrap(),
            b,
            "the same content, the same file"
        );
        let not_pem = d.path().join("key.txt");
        std::fs::write(&not_pem, "secret").unwrap();
        let e = ca_bundle(&out, std::slice::from_ref(&not_pem)).unwrap_err();
        assert_eq!(
            e,
            format!(
                "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                not_pem.display()
            )
        );
        let e = ca_bundle(&out, &[d.path().join("gone.pem")]).unwrap_err();
        assert!(e.starts_with("cannot read "), "{e}");
    }
}
