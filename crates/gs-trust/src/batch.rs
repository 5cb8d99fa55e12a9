//! Checking many ed25519 signatures with one equation (a reindex checks every note's): the
//! batch check ed25519-dalek's `verify_batch` makes, with each signature's weight drawn from the
//! system's random source, and the same answer for each signature as `VerifyingKey::verify`.
//!
//! A signature holds when `s·B = R + k·A` (`k` the hash of `R`, `A` and the message). For a batch,
//! `Σ zᵢ·(Rᵢ + kᵢ·Aᵢ − sᵢ·B) = 0` with random 128-bit `zᵢ` holds when every signature holds, and
//! otherwise only by a chance of 2⁻¹²⁸; the `Aᵢ` of one key add up to one term, so a batch costs
//! one multiplication of each `Rᵢ` by a 128-bit number, shared doublings (a third of checking
//! each alone). A batch that does not hold is halved until the signatures that do not hold are
//! found, each then checked alone. What the equation cannot take is checked alone too: an `s`
//! out of range, an `R` that is no point or not written the one way `verify` compares it, a key
//! with a small-order part.
//!
//! One answer can differ, and only for its signer: an `R` given a small-order part by the
//! holder of the key (who knows `s` for it) fails `verify` and may pass the equation (the part
//! vanishes for some weights; `R` is not checked for it, which would cost what the batch
//! saves). Nobody without the private key can make such a signature, and its holder could sign
//! anything outright, so no note passes here that its key did not sign.

use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::{IsIdentity, VartimeMultiscalarMul};
use ed25519_dalek::{Signature, Verifier, VerifyingKey};
use sha2::{Digest, Sha512};

/// One signature to check: the key, the signed bytes and the signature.
pub(crate) type Item<'a> = (&'a VerifyingKey, &'a [u8], &'a Signature);

/// Batches this small are checked one signature at a time: the equation would not save the
/// work of a second try.
const ALONE: usize = 4;

/// Whether each of `items` holds, as `VerifyingKey::verify` answers.
pub(crate) fn check_all(items: &[Item<'_>]) -> Vec<bool> {
    let mut holds = vec![false; items.len()];
    let mut keys: Vec<(&VerifyingKey, EdwardsPoint, bool)> = Vec::new();
    let mut terms = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let key = match keys.iter().position(|(k, _, _)| *k == item.0) {
            Some(at) => at,
            None => {
                let point = item.0.to_edwards();
                keys.push((item.0, point, point.is_torsion_free()));
                keys.len() - 1
            }
        };
        match keys[key].2.then(|| term(item)).flatten() {
            Some((r, s, k)) => terms.push(Term {
                item: i,
                key,
                r,
                s,
                k,
            }),
            None => holds[i] = alone(item),
        }
    }
    let points: Vec<EdwardsPoint> = keys.iter().map(|(_, p, _)| *p).collect();
    settle(items, &points, &terms, &mut holds);
    holds
}

/// A signature as the equation takes it: `R`, `s`, and `k` (with its key's place).
struct Term {
    item: usize,
    key: usize,
    r: EdwardsPoint,
    s: Scalar,
    k: Scalar,
}

/// `R`, `s` and `k` of a signature the equation can take; `None` for one it cannot.
fn term((key, message, signature): &Item<'_>) -> Option<(EdwardsPoint, Scalar, Scalar)> {
    let s = Option::<Scalar>::from(Scalar::from_canonical_bytes(*signature.s_bytes()))?;
    let r_bytes = signature.r_bytes();
    if !canonical(r_bytes) {
        return None;
    }
    let r = CompressedEdwardsY(*r_bytes).decompress()?;
    let mut h = Sha512::new();
    h.update(r_bytes);
    h.update(key.as_bytes());
    h.update(message);
    let mut wide = [0u8; 64];
    wide.copy_from_slice(&h.finalize());
    let k = Scalar::from_bytes_mod_order_wide(&wide);
    Some((r, s, k))
}

/// Whether `bytes` is the one way the point they decode to is written: `verify` compares the
/// `R` it computes, written that way, with the signature's bytes, so another way of writing
/// the same point never holds there. Not so: a `y` of `p` or more, or the sign bit set on the
/// two points whose `x` is 0 (`y` = 1 or `p` − 1).
fn canonical(bytes: &[u8; 32]) -> bool {
    let mut y = *bytes;
    let sign = y[31] >> 7;
    y[31] &= 0x7f;
    // p = 2²⁵⁵ − 19, little-endian: ed ff … ff 7f.
    let at_least_p = y[31] == 0x7f && y[1..31].iter().all(|&b| b == 0xff) && y[0] >= 0xed;
    let mut one = [0u8; 32];
    one[0] = 1;
    let mut minus_one = [0xffu8; 32];
    minus_one[0] = 0xec;
    minus_one[31] = 0x7f;
    !at_least_p && !(sign == 1 && (y == one || y == minus_one))
}

/// A signature checked by itself.
fn alone((key, message, signature): &Item<'_>) -> bool {
    key.verify(message, signature).is_ok()
}

/// Decide each of `terms` into `holds`: the whole batch by one equation, else each half.
fn settle(items: &[Item<'_>], keys: &[EdwardsPoint], terms: &[Term], holds: &mut [bool]) {
    if terms.len() <= ALONE {
        for t in terms {
            holds[t.item] = alone(&items[t.item]);
        }
        return;
    }
    match equation(keys, terms) {
        Some(true) => {
            for t in terms {
                holds[t.item] = true;
            }
        }
        Some(false) => {
            let (a, b) = terms.split_at(terms.len() / 2);
            settle(items, keys, a, holds);
            settle(items, keys, b, holds);
        }
        // No random weights to be had: each alone.
        None => {
            for t in terms {
                holds[t.item] = alone(&items[t.item]);
            }
        }
    }
}

/// Whether `Σ zᵢ·Rᵢ + Σ (zᵢ·kᵢ)·Aᵢ − (Σ zᵢ·sᵢ)·B` is the identity for fresh random `zᵢ`;
/// `None` when the system gives no random bytes.
fn equation(keys: &[EdwardsPoint], terms: &[Term]) -> Option<bool> {
    let mut random = vec![0u8; 16 * terms.len()];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut random).ok()?;
    let z: Vec<Scalar> = random
        .chunks_exact(16)
        .map(|c| Scalar::from(u128::from_le_bytes(c.try_into().expect("16 bytes"))))
        .collect();
    let mut b = Scalar::ZERO;
    let mut a = vec![Scalar::ZERO; keys.len()];
    for (t, z) in terms.iter().zip(&z) {
        b += z * t.s;
        a[t.key] += z * t.k;
    }
    let scalars = std::iter::once(-b).chain(z).chain(a);
    let points = std::iter::once(curve25519_dalek::constants::ED25519_BASEPOINT_POINT)
        .chain(terms.iter().map(|t| t.r))
        .chain(keys.iter().copied());
    Some(EdwardsPoint::vartime_multiscalar_mul(scalars, points).is_identity())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::{Signer, SigningKey};

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    #[test]
    fn each_signature_is_judged_as_verify_judges_it_whatever_else_is_in_the_batch() {
        let (a, b) = (key(1), key(2));
        let messages: Vec<Vec<u8>> = (0..40)
            .map(|i| format!("record {i}").into_bytes())
            .collect();
        let mut signed: Vec<(VerifyingKey, Vec<u8>, Signature)> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let k = if i % 3 == 0 { &b } else { &a };
                (k.verifying_key(), m.clone(), k.sign(m))
            })
            .collect();
        // Wrong message, wrong key, a changed s, an R that is no point, s out of range, the
        // same R written another way (y + p is not possible below 2²⁵⁵ for most y: use the
        // sign bit of a point whose x is 0).
        signed[5].1 = b"another record".to_vec();
        signed[10].0 = b.verifying_key();
        let mut bytes = signed[13].2.to_bytes();
        bytes[40] ^= 1;
        signed[13].2 = Signature::from_bytes(&bytes);
        let mut bytes = signed[17].2.to_bytes();
        bytes[..32].copy_from_slice(&[0xff; 32]);
        signed[17].2 = Signature::from_bytes(&bytes);
        let mut bytes = signed[21].2.to_bytes();
        bytes[63] = 0xff;
        signed[21].2 = Signature::from_bytes(&bytes);
        let mut bytes = signed[25].2.to_bytes();
        bytes[..32].copy_from_slice(&{
            let mut one = [0u8; 32];
            one[0] = 1;
            one[31] = 0x80;
            one
        });
        signed[25].2 = Signature::from_bytes(&bytes);
        let items: Vec<Item<'_>> = signed.iter().map(|(k, m, s)| (k, &m[..], s)).collect();
        let expected: Vec<bool> = items.iter().map(alone).collect();
        assert_eq!(
            expected.iter().filter(|h| !**h).count(),
            6,
            "the six spoiled ones fail alone"
        );
        assert_eq!(check_all(&items), expected);
        // All good: one equation; one bad among many: found.
        let good: Vec<Item<'_>> = items
            .iter()
            .zip(&expected)
            .filter(|(_, h)| **h)
            .map(|(i, _)| *i)
            .collect();
        assert!(check_all(&good).iter().all(|h| *h));
        let mut one_bad = good.clone();
        one_bad.insert(20, items[13]);
        let holds = check_all(&one_bad);
        assert_eq!(holds.iter().filter(|h| !**h).count(), 1);
        assert!(!holds[20]);
    }

    #[test]
    fn a_point_written_the_one_way_is_canonical_and_another_way_is_not() {
        let p = key(3).verifying_key().to_bytes();
        assert!(canonical(&p));
        let mut p_plus = [0xffu8; 32];
        p_plus[0] = 0xee;
        p_plus[31] = 0x7f;
        assert!(!canonical(&p_plus), "p + 1 is 1 written another way");
        let mut one = [0u8; 32];
        one[0] = 1;
        assert!(canonical(&one));
        one[31] = 0x80;
        assert!(!canonical(&one), "x = 0 has no negative");
    }
}
