//! Whose results are evidence: this machine's signing key (ed25519, made on first use in the
//! data dir), the signers the user trusts (git's `allowed_signers` file named in the user
//! config), and the keys of the daemons that share the index. Records are signed as
//! `ssh-keygen -Y sign` signs (SSHSIG, namespace `git-sandbox`), so `ssh-keygen -Y verify`
//! checks them too.

mod batch;
mod signers;

pub use signers::{parse as parse_allowed_signers, AllowedSigner};

use base64::Engine;
use gs_model::Verified;
use ssh_key::{HashAlg, LineEnding, PrivateKey, PublicKey, SshSig};
use std::path::{Path, PathBuf};

/// The SSHSIG namespace of a record's signature: a signature made for git commits (namespace
/// `git`) or anything else never passes for a record, nor the other way round.
pub const NAMESPACE: &str = "git-sandbox";

/// The key file in the data dir: an OpenSSH private key, 0600.
pub const KEY_FILE: &str = "signing-key";

/// What went wrong reading the keys: one line naming the file, and the fix.
#[derive(Debug, thiserror::Error)]
#[error("{problem}")]
pub struct TrustError {
    pub problem: String,
    pub fix: String,
}

/// This machine's key and the keys it trusts.
pub struct Keyring {
    key: PrivateKey,
    /// The same key as the signer needs it, made once: ssh-key makes it (and checks the public
    /// half against it) on every signature, most of a signature's cost.
    signer: ed25519_dalek::SigningKey,
    /// This data dir's id: what the records it signs say made them (`by`).
    pub home_id: String,
    signers: Vec<AllowedSigner>,
    /// Keys registered by the daemons sharing the index: (home id, key), and when they were
    /// read (a daemon that joins later is seen at the next read).
    fleet: std::cell::RefCell<(Option<std::time::Instant>, Vec<FleetKey>)>,
}

/// A key a data dir sharing the index registered, with its home id.
type FleetKey = (String, PublicKey);

impl Keyring {
    /// The key of the data dir `home` (made now when it has none), and the signers of the
    /// `allowed_signers` file named (a path or `~/…`), when one is.
    pub fn load(
        home: &Path,
        home_id: String,
        allowed_signers: Option<&str>,
    ) -> Result<Keyring, TrustError> {
        let key = load_or_make(&home.join(KEY_FILE), &home_id)?;
        let signers = match allowed_signers {
            Some(file) => read_signers(&expand(file))?,
            None => Vec::new(),
        };
        let signer = match key.key_data() {
            ssh_key::private::KeypairData::Ed25519(pair) => {
                ed25519_dalek::SigningKey::from_bytes(&pair.private.to_bytes())
            }
            _ => {
                return Err(TrustError {
                    problem: format!(
                        "this machine's signing key {} is not an unencrypted ed25519 key",
                        home.join(KEY_FILE).display()
                    ),
                    fix: "move the file away: a new key is made on the next run (then give others its `git sandbox key` line again)".into(),
                })
            }
        };
        Ok(Keyring {
            key,
            signer,
            home_id,
            signers,
            fleet: Default::default(),
        })
    }

    /// Whether the fleet's keys should be read (again): never read, or read over a minute ago.
    pub fn fleet_stale(&self) -> bool {
        self.fleet
            .borrow()
            .0
            .is_none_or(|at| at.elapsed() > std::time::Duration::from_secs(60))
    }

    /// Keep the fleet's keys as last read for another minute (the index could not be asked).
    pub fn keep_fleet(&self) {
        self.fleet.borrow_mut().0 = Some(std::time::Instant::now());
    }

    /// Trust, besides, the keys registered by the daemons sharing the index (home id, key line).
    pub fn set_fleet(&self, fleet: Vec<(String, String)>) {
        let keys = fleet
            .into_iter()
            .filter_map(|(home, line)| Some((home, PublicKey::from_openssh(&line).ok()?)))
            .collect();
        *self.fleet.borrow_mut() = (Some(std::time::Instant::now()), keys);
    }

    /// This machine's public key, as an `authorized_keys`-style line (`ssh-ed25519 AAAA…`).
    pub fn public_key(&self) -> String {
        let mut k = self.key.public_key().clone();
        k.set_comment("");
        k.to_openssh().expect("an ed25519 key always encodes")
    }

    /// The principal this machine's records are signed as in others' `allowed_signers`.
    pub fn principal(&self) -> String {
        format!("git-sandbox@{}", self.home_id)
    }

    /// The line for another machine's `allowed_signers` file: trusted for records only.
    pub fn allowed_signers_line(&self) -> String {
        format!(
            "{} namespaces=\"{NAMESPACE}\" {}",
            self.principal(),
            self.public_key()
        )
    }

    pub fn fingerprint(&self) -> String {
        self.key
            .public_key()
            .fingerprint(HashAlg::Sha256)
            .to_string()
    }

    /// Whether the key of `fingerprint` is this machine's or its fleet's: records it signed may
    /// be written again here (signed with this machine's key) when their note went missing.
    pub fn is_ours(&self, fingerprint: &str) -> bool {
        fingerprint == self.fingerprint()
            || self
                .fleet
                .borrow()
                .1
                .iter()
                .any(|(_, k)| k.fingerprint(HashAlg::Sha256).to_string() == fingerprint)
    }

    /// The SSH signature of `message`: the base64 of the SSHSIG blob (what `ssh-keygen -Y
    /// sign` armours between its BEGIN and END lines).
    pub fn sign(&self, message: &[u8]) -> String {
        use ed25519_dalek::Signer;
        let data = SshSig::signed_data(NAMESPACE, HashAlg::Sha512, message)
            .expect("the namespace and hash always encode");
        let signature = ssh_key::Signature::new(
            ssh_key::Algorithm::Ed25519,
            self.signer.sign(&data).to_bytes().to_vec(),
        )
        .expect("an ed25519 signature is 64 bytes");
        let sig = SshSig::new(
            self.key.public_key().key_data().clone(),
            NAMESPACE,
            HashAlg::Sha512,
            signature,
        )
        .expect("an ed25519 key always signs");
        armour_body(&sig)
    }

    /// Who vouches for `message` signed with `signature` (as [`Keyring::sign`] makes it): this
    /// machine, a trusted signer or the fleet; else why nobody does.
    pub fn verify(&self, message: &[u8], signature: &str) -> Result<Verified, String> {
        let fleet = self.fleet.borrow();
        let keys = Keys {
            own: self.key.public_key(),
            signers: &self.signers,
            fleet: &fleet.1,
            ready: &[],
        };
        keys.verify(message, signature)
    }

    /// The keys this keyring trusts now, as a value threads can share: a reindex checks its
    /// notes' signatures on every core.
    pub fn verifier(&self) -> Verifier {
        let own = self.key.public_key().clone();
        let signers = self.signers.clone();
        let fleet = self.fleet.borrow().1.clone();
        let keys = std::iter::once(&own)
            .chain(signers.iter().map(|s| &s.key))
            .chain(fleet.iter().map(|(_, k)| k));
        let mut ready: Vec<ReadyKey> = Vec::new();
        for key in keys {
            if let ssh_key::public::KeyData::Ed25519(k) = key.key_data() {
                if let Ok(v) = ed25519_dalek::VerifyingKey::try_from(k) {
                    if !ready.iter().any(|(r, _)| r == k) {
                        ready.push((*k, v));
                    }
                }
            }
        }
        Verifier {
            own,
            signers,
            fleet,
            ready,
        }
    }
}

/// An ed25519 key as signatures are checked with it, made once: ssh-key makes it from the key's
/// bytes for every signature (a tenth of a check's cost).
type ReadyKey = (
    ssh_key::public::Ed25519PublicKey,
    ed25519_dalek::VerifyingKey,
);

/// [`Keyring::verify`] with the keys trusted when it was made ([`Keyring::verifier`]).
#[derive(Clone)]
pub struct Verifier {
    own: PublicKey,
    signers: Vec<AllowedSigner>,
    fleet: Vec<FleetKey>,
    ready: Vec<ReadyKey>,
}

impl Verifier {
    pub fn verify(&self, message: &[u8], signature: &str) -> Result<Verified, String> {
        self.keys().verify(message, signature)
    }

    /// [`Verifier::verify`] of each (message, signature) of `items`, in their order: the same
    /// answers, the ed25519 equations of them checked together ([`batch`]), a third of the work
    /// of checking each alone.
    pub fn verify_many(&self, items: &[(&[u8], &str)]) -> Vec<Result<Verified, String>> {
        let keys = self.keys();
        let judged: Vec<Judged> = items.iter().map(|(m, s)| keys.judge(m, s)).collect();
        let checks: Vec<batch::Item<'_>> = judged
            .iter()
            .filter_map(|j| match j {
                Judged::Done(_) => None,
                Judged::Check {
                    key,
                    data,
                    signature,
                    ..
                } => Some((*key, &data[..], signature)),
            })
            .collect();
        let mut holds = batch::check_all(&checks).into_iter();
        judged
            .into_iter()
            .map(|j| {
                let holds = matches!(j, Judged::Check { .. }) && holds.next().unwrap_or(false);
                j.finish(holds)
            })
            .collect()
    }

    fn keys(&self) -> Keys<'_> {
        Keys {
            own: &self.own,
            signers: &self.signers,
            fleet: &self.fleet,
            ready: &self.ready,
        }
    }
}

/// A signature judged but for the ed25519 equation of a key made ready: its answer, or what to
/// check and the answer either way.
enum Judged<'a> {
    Done(Result<Verified, String>),
    Check {
        key: &'a ed25519_dalek::VerifyingKey,
        /// The SSHSIG signed data (namespace, hash algorithm, the message's hash).
        data: Vec<u8>,
        signature: ed25519_dalek::Signature,
        /// The answer when the equation holds, and the signer named when it does not.
        verified: Verified,
    },
}

impl Judged<'_> {
    /// The answer, given whether the equation holds (for a [`Judged::Check`]).
    fn finish(self, holds: bool) -> Result<Verified, String> {
        match self {
            Judged::Done(answer) => answer,
            Judged::Check { verified, .. } if holds => Ok(verified),
            Judged::Check { verified, .. } => Err(mismatch(&verified.signer)),
        }
    }
}

/// Why a trusted signer's signature was not taken.
fn mismatch(signer: &str) -> String {
    format!("the signature of {signer} does not match the record")
}

/// The keys a signature may be checked against: this machine's, the trusted signers', the
/// fleet's, and those of them made ready to check with.
struct Keys<'a> {
    own: &'a PublicKey,
    signers: &'a [AllowedSigner],
    fleet: &'a [FleetKey],
    ready: &'a [ReadyKey],
}

impl<'a> Keys<'a> {
    fn verify(&self, message: &[u8], signature: &str) -> Result<Verified, String> {
        use ed25519_dalek::Verifier as _;
        let holds = |j: &Judged| match j {
            Judged::Check {
                key,
                data,
                signature,
                ..
            } => key.verify(data, signature).is_ok(),
            Judged::Done(_) => false,
        };
        let judged = self.judge(message, signature);
        let holds = holds(&judged);
        judged.finish(holds)
    }

    /// Who would vouch for `message` signed with `signature`, all but the ed25519 equation
    /// of a ready key decided: the signature parsed, its key trusted, its namespace ours.
    fn judge(&self, message: &[u8], signature: &str) -> Judged<'a> {
        let Keys {
            own,
            signers,
            fleet,
            ready,
        } = *self;
        let Some(sig) = parse_signature(signature) else {
            return Judged::Done(Err("the signature does not parse".into()));
        };
        let key = PublicKey::new(sig.public_key().clone(), "");
        let fingerprint = key.fingerprint(HashAlg::Sha256).to_string();
        let signer = if sig.public_key() == own.key_data() {
            Some(("this machine".to_string(), true))
        } else {
            let now = gs_util::time::now_millis() / 1000;
            signers
                .iter()
                .find(|s| s.key.key_data() == sig.public_key() && s.counts_for(NAMESPACE, now))
                .map(|s| (s.principals.clone(), false))
                .or_else(|| {
                    fleet
                        .iter()
                        .find(|(_, k)| k.key_data() == sig.public_key())
                        .map(|(home, _)| (format!("git-sandbox@{home} (fleet)"), false))
                })
        };
        let Some((signer, here)) = signer else {
            return Judged::Done(Err(format!(
                "signed by a key this machine does not trust ({fingerprint})"
            )));
        };
        let verified = Verified {
            signer,
            key: fingerprint,
            here,
        };
        let ready = match sig.public_key() {
            ssh_key::public::KeyData::Ed25519(k) => ready.iter().find(|(r, _)| r == k),
            _ => None,
        };
        let check = ready.and_then(|(_, key)| Some((key, ed25519_check(message, &sig)?)));
        match check {
            Some((key, Ok((data, signature)))) => Judged::Check {
                key,
                data,
                signature,
                verified,
            },
            Some((_, Err(()))) => Judged::Done(Err(mismatch(&verified.signer))),
            // Not a ready key, or reserved bytes in the signature: ssh-key's own check.
            None => Judged::Done(match key.verify(NAMESPACE, message, &sig) {
                Ok(()) => Ok(verified),
                Err(_) => Err(mismatch(&verified.signer)),
            }),
        }
    }
}

/// The SSHSIG signed data and the signature its equation checks; `Err` for a signature that
/// cannot hold.
type Ed25519Check = Result<(Vec<u8>, ed25519_dalek::Signature), ()>;

/// What ssh-key's `PublicKey::verify` checks of an ed25519 signature, but for its equation: the
/// namespace must be ours; then the signed data (the namespace, the hash algorithm and the
/// message's hash) and the signature. `None` for a signature with reserved bytes, which
/// ssh-key's own check then answers.
fn ed25519_check(message: &[u8], sig: &SshSig) -> Option<Ed25519Check> {
    if sig.namespace() != NAMESPACE {
        return Some(Err(()));
    }
    if !sig.reserved().is_empty() {
        return None;
    }
    let Ok(data) = SshSig::signed_data(NAMESPACE, sig.hash_alg(), message) else {
        return Some(Err(()));
    };
    let Ok(signature) = ed25519_dalek::Signature::try_from(sig.signature()) else {
        return Some(Err(()));
    };
    Some(Ok((data, signature)))
}

/// The base64 body of a signature's PEM armour, on one line.
fn armour_body(sig: &SshSig) -> String {
    let pem = sig
        .to_pem(LineEnding::LF)
        .expect("a signature always encodes");
    pem.lines().filter(|l| !l.starts_with("-----")).collect()
}

/// A signature from its one-line base64 body.
fn parse_signature(body: &str) -> Option<SshSig> {
    // Checked as base64 first: the armour is rebuilt around it, so nothing else may hide in it.
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .ok()?;
    let mut pem = String::from("-----BEGIN SSH SIGNATURE-----\n");
    for chunk in body.as_bytes().chunks(70) {
        pem.push_str(std::str::from_utf8(chunk).ok()?);
        pem.push('\n');
    }
    pem.push_str("-----END SSH SIGNATURE-----\n");
    SshSig::from_pem(pem).ok()
}

/// `~/…` from the user's home.
fn expand(file: &str) -> PathBuf {
    match file.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/"))
            .join(rest),
        None => PathBuf::from(file),
    }
}

fn read_signers(path: &Path) -> Result<Vec<AllowedSigner>, TrustError> {
    let text = std::fs::read_to_string(path).map_err(|e| TrustError {
        problem: format!("cannot read the allowed_signers file {}: {e}", path.display()),
        fix: "create it (one line per machine, as `git sandbox key` prints it there), or remove [trust] allowed_signers from your user config".into(),
    })?;
    parse_allowed_signers(&text).map_err(|(line, why)| TrustError {
        problem: format!("{}:{line}: {why}", path.display()),
        fix: "write each entry as `principal [namespaces=\"git-sandbox\"] ssh-ed25519 AAAA…`, as `git sandbox key` prints it".into(),
    })
}

/// The key at `path`, made now (ed25519, 0600) when there is none. Two processes that race
/// both read the one that was linked in first.
fn load_or_make(path: &Path, home_id: &str) -> Result<PrivateKey, TrustError> {
    let broken = |e: String| {
        TrustError {
        problem: format!("cannot use this machine's signing key {}: {e}", path.display()),
        fix: "move the file away: a new key is made on the next run (then give others its `git sandbox key` line again)".into(),
    }
    };
    use gs_util::private::{read_private, NotPrivate};
    match read_private(path) {
        Ok(Some(text)) => {
            return PrivateKey::from_openssh(text).map_err(|e| broken(e.to_string()))
        }
        Ok(None) => {}
        Err(NotPrivate::Link) => return Err(TrustError {
            problem: format!("this machine's signing key {} is a symbolic link, which is never followed", path.display()),
            fix: format!("put the key file itself at {} (chmod 600), or move the link away: a new key is made on the next run", path.display()),
        }),
        Err(NotPrivate::Open(mode)) => return Err(TrustError {
            problem: format!("this machine's signing key {} may be read by others (mode {mode:04o}): whoever copied it can sign results as this machine", path.display()),
            fix: format!("chmod 600 {}; if others may have copied it, move it away instead (a new key is made on the next run) and give the new `git sandbox key` line to those who trust this machine", path.display()),
        }),
        Err(NotPrivate::NotAFile) => return Err(broken("it is not a regular file".into())),
        Err(NotPrivate::Io(e)) => return Err(broken(e.to_string())),
    }
    let mut seed = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut seed)
        .map_err(|_| broken("the system's random source failed".into()))?;
    let pair = ssh_key::private::Ed25519Keypair::from_seed(&seed);
    let key = PrivateKey::new(pair.into(), format!("git-sandbox@{home_id}"))
        .map_err(|e| broken(e.to_string()))?;
    let text = key
        .to_openssh(LineEnding::LF)
        .map_err(|e| broken(e.to_string()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    gs_util::private::create_dir_all(dir).map_err(|e| broken(e.to_string()))?;
    let temp = dir.join(format!(".{KEY_FILE}.{}", gs_util::random_hex(6)));
    let written = gs_util::private::create_file(&temp)
        .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()))
        .and_then(|()| std::fs::hard_link(&temp, path));
    let _ = std::fs::remove_file(&temp);
    match written {
        Ok(()) => Ok(key),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let text = std::fs::read_to_string(path).map_err(|e| broken(e.to_string()))?;
            PrivateKey::from_openssh(text).map_err(|e| broken(e.to_string()))
        }
        Err(e) => Err(broken(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(dir: &Path, id: &str, signers: Option<&str>) -> Keyring {
        Keyring::load(dir, id.into(), signers).unwrap()
    }

    #[test]
    fn a_signature_is_the_one_ssh_key_makes_and_a_key_of_another_kind_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ring = ring(dir.path(), "a", None);
        for message in [&b""[..], b"{\"commit\":\"abc\"}", &[7u8; 5000][..]] {
            // ed25519 signs deterministically: the same bytes as ssh-key's own path.
            let theirs = ring.key.sign(NAMESPACE, HashAlg::Sha512, message).unwrap();
            assert_eq!(ring.sign(message), armour_body(&theirs));
            assert!(ring.verify(message, &ring.sign(message)).is_ok());
        }
        // A key with a passphrase (ssh-keygen's) cannot sign unattended.
        let other = tempfile::tempdir().unwrap();
        let made = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "pass", "-f"])
            .arg(other.path().join(KEY_FILE))
            .status()
            .unwrap();
        assert!(made.success());
        let err = Keyring::load(other.path(), "b".into(), None).err().unwrap();
        assert!(
            err.problem.contains("not an unencrypted ed25519 key"),
            "{}",
            err.problem
        );
    }

    #[test]
    fn a_verifier_answers_as_the_keyring_does_for_every_kind_of_signature() {
        let d = tempfile::tempdir().unwrap();
        let b = ring(&d.path().join("b"), "b-2", None);
        let c = ring(&d.path().join("c"), "c-3", None);
        let file = d.path().join("allowed");
        std::fs::write(&file, format!("{}\n", b.allowed_signers_line())).unwrap();
        let a = ring(&d.path().join("a"), "a-1", file.to_str());
        let f = ring(&d.path().join("f"), "f-4", None);
        a.set_fleet(vec![("f-4".into(), f.public_key())]);
        let m = b"{\"commit\":\"abc\"}";
        let other_namespace = armour_body(&a.key.sign("git", HashAlg::Sha512, m).unwrap());
        let sha256 = armour_body(&a.key.sign(NAMESPACE, HashAlg::Sha256, m).unwrap());
        // The signature's last bytes changed: still parses, no longer matches.
        let mut raw = base64::engine::general_purpose::STANDARD
            .decode(a.sign(m))
            .unwrap();
        *raw.last_mut().unwrap() ^= 1;
        let tampered = base64::engine::general_purpose::STANDARD.encode(raw);
        let cases = [
            (&m[..], a.sign(m), true),
            (&b"{\"commit\":\"abd\"}"[..], a.sign(m), false),
            (&m[..], b.sign(m), true),
            (&m[..], f.sign(m), true),
            (&m[..], c.sign(m), false),
            (&m[..], other_namespace, false),
            (&m[..], sha256, true),
            (&m[..], tampered, false),
            (&m[..], "AAAA".to_string(), false),
            (&m[..], "not base64!".to_string(), false),
        ];
        let v = a.verifier();
        assert_eq!(v.ready.len(), 3, "this machine's, b's and the fleet's keys");
        let mut answers = Vec::new();
        for (i, (message, sig, ok)) in cases.iter().enumerate() {
            let theirs = a.verify(message, sig);
            assert_eq!(v.verify(message, sig), theirs, "case {i}");
            assert_eq!(theirs.is_ok(), *ok, "case {i}: {theirs:?}");
            answers.push(theirs);
        }
        // All at once, each case among the others (twice, so the equation takes many): the
        // same answers.
        let items: Vec<(&[u8], &str)> = cases
            .iter()
            .chain(&cases)
            .map(|(m, s, _)| (*m, s.as_str()))
            .collect();
        let twice: Vec<_> = answers.iter().chain(&answers).cloned().collect();
        assert_eq!(v.verify_many(&items), twice);
        let good: Vec<(&[u8], &str)> = items
            .iter()
            .zip(&twice)
            .filter(|(_, a)| a.is_ok())
            .map(|(i, _)| *i)
            .collect();
        assert!(v.verify_many(&good).iter().all(Result::is_ok));
    }

    #[test]
    fn the_key_is_made_once_private_and_verifies_its_own_signatures() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        let a = ring(d.path(), "a-1", None);
        let again = ring(d.path(), "a-1", None);
        assert_eq!(a.public_key(), again.public_key());
        let mode = std::fs::metadata(d.path().join(KEY_FILE)).unwrap().mode();
        assert_eq!(mode & 0o777, 0o600);
        let sig = a.sign(b"record");
        let v = again.verify(b"record", &sig).unwrap();
        assert!(v.here);
        assert!(again.verify(b"recorD", &sig).is_err());
        assert!(again.verify(b"record", "AAAA").is_err());
    }

    #[test]
    fn a_key_others_can_read_or_a_link_in_its_place_is_refused_and_left_alone() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let made = ring(d.path(), "a-1", None).public_key();
        let key = d.path().join(KEY_FILE);
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Keyring::load(d.path(), "a-1".into(), None).err().unwrap();
        assert!(
            e.problem.contains("may be read by others (mode 0644)"),
            "{}",
            e.problem
        );
        assert!(e.fix.starts_with("chmod 600 "), "{}", e.fix);
        let mode = std::fs::metadata(&key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644, "the key is left as it was");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(ring(d.path(), "a-1", None).public_key(), made);

        // A link to a key elsewhere (someone else's) is not followed.
        let other = tempfile::tempdir().unwrap();
        ring(other.path(), "b-2", None);
        let link = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(other.path().join(KEY_FILE), link.path().join(KEY_FILE))
            .unwrap();
        let e = Keyring::load(link.path(), "c-3".into(), None)
            .err()
            .unwrap();
        assert!(e.problem.contains("is a symbolic link"), "{}", e.problem);
        assert!(std::fs::symlink_metadata(link.path().join(KEY_FILE))
            .unwrap()
            .file_type()
            .is_symlink());
    }

    #[test]
    fn another_machine_counts_only_through_allowed_signers_for_our_namespace() {
        let d = tempfile::tempdir().unwrap();
        let b = ring(&d.path().join("b"), "b-2", None);
        let sig = b.sign(b"r");
        let a = ring(&d.path().join("a"), "a-1", None);
        assert!(a.verify(b"r", &sig).unwrap_err().contains("does not trust"));
        let file = d.path().join("allowed");
        std::fs::write(&file, format!("{}\n", b.allowed_signers_line())).unwrap();
        let a = ring(&d.path().join("a"), "a-1", file.to_str());
        let v = a.verify(b"r", &sig).unwrap();
        assert_eq!(v.signer, "git-sandbox@b-2");
        assert!(!v.here);
        std::fs::write(&file, format!("x namespaces=\"git\" {}\n", b.public_key())).unwrap();
        let a = ring(&d.path().join("a"), "a-1", file.to_str());
        assert!(a.verify(b"r", &sig).is_err());
        std::fs::write(&file, "garbage\n").unwrap();
        let e = Keyring::load(&d.path().join("a"), "a-1".into(), file.to_str())
            .err()
            .unwrap();
        assert!(e.problem.contains("allowed:1:"), "{}", e.problem);
    }
}
