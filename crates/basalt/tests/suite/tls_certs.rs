//! Test-time certificates (rcgen): a CA, server certificates it signs for
//! 127.0.0.1 and localhost (valid, expired), client certificates, all
//! written as PEM into a test's temp directory. No key outlives the test.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    date_time_ymd,
};

/// A CA: its certificate on disk and what it needs to sign more.
pub struct TestCa {
    pub cert_path: PathBuf,
    params: CertificateParams,
    key: KeyPair,
}

/// A certificate and key on disk.
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TestCa {
    pub fn new(dir: &Path, name: &str) -> TestCa {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params
            .distinguished_name
            .push(DnType::CommonName, format!("Basalt test CA {name}"));
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).expect("self-sign CA");
        let cert_path = dir.join(format!("{name}-ca.pem"));
        std::fs::write(&cert_path, cert.pem()).expect("write CA");
        TestCa {
            cert_path,
            params,
            key,
        }
    }

    fn sign(&self, dir: &Path, file: &str, params: CertificateParams) -> CertFiles {
        let key = KeyPair::generate().expect("leaf key");
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).expect("sign");
        let files = CertFiles {
            cert: dir.join(format!("{file}.pem")),
            key: dir.join(format!("{file}.key")),
        };
        std::fs::write(&files.cert, cert.pem()).expect("write cert");
        std::fs::write(&files.key, key.serialize_pem()).expect("write key");
        files
    }

    /// A server certificate for 127.0.0.1 and localhost, valid now.
    pub fn server(&self, dir: &Path, file: &str) -> CertFiles {
        self.sign(dir, file, leaf_params())
    }

    /// A server certificate that expired in 2021.
    pub fn expired_server(&self, dir: &Path, file: &str) -> CertFiles {
        let mut p = leaf_params();
        p.not_before = date_time_ymd(2020, 1, 1);
        p.not_after = date_time_ymd(2021, 1, 1);
        self.sign(dir, file, p)
    }

    /// A client certificate.
    pub fn client(&self, dir: &Path, file: &str) -> CertFiles {
        let mut p = CertificateParams::new(vec!["basalt-test-client".to_string()]).expect("params");
        p.distinguished_name
            .push(DnType::CommonName, "basalt test client");
        self.sign(dir, file, p)
    }
}

fn leaf_params() -> CertificateParams {
    let mut p = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .expect("leaf params");
    p.distinguished_name.push(DnType::CommonName, "localhost");
    p
}
