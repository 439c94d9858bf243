// DkgSecurity: applies SCRAM users and ACLs to the SASL test broker of `scripts/kafka sasl` in one JVM (one
// AclCommand run per binding would cost a JVM start each). Run by `scripts/kafka sasl grant`, which passes the
// bootstrap and the admin's client properties; Java's single-file source launcher compiles it in memory.
//
// Reads lines from stdin (blank lines and `#` comments ignored); passwords come on stdin, never as arguments:
//   user NAME PASSWORD                                      create or update a SCRAM-SHA-512 user
//   allow PRINCIPAL RESOURCE_TYPE PATTERN NAME OPS          add ALLOW ACLs, host *: e.g.
//   allow User:s1 TOPIC LITERAL orders READ,DESCRIBE        (RESOURCE_TYPE: TOPIC GROUP CLUSTER TRANSACTIONAL_ID;
//                                                           PATTERN: LITERAL PREFIXED; OPS: AclOperation names)
//   revoke PRINCIPAL RESOURCE_TYPE PATTERN NAME OPS         delete those ALLOW ACLs
// Returns once the broker reports every change (users and ACLs are applied through the metadata log, so a
// client connecting right after sees them). Exit status 1 with the offending line on any error.
//
// References: Kafka's Admin API (createAcls, deleteAcls, describeAcls, alterUserScramCredentials, KIP-554).

import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;

public final class DkgSecurity {
    private static final long DEADLINE_MS = 30_000;

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: DkgSecurity BOOTSTRAP ADMIN_PROPERTIES < grants");
            System.exit(2);
        }
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[1])) {
            props.load(in);
        }
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        List<AclBinding> allow = new ArrayList<>();
        List<AclBinding> revoke = new ArrayList<>();
        List<UserScramCredentialAlteration> users = new ArrayList<>();
        Set<String> userNames = new HashSet<>();
        BufferedReader reader = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        int n = 0;
        while ((line = reader.readLine()) != null) {
            n++;
            String t = line.trim();
            if (t.isEmpty() || t.startsWith("#")) {
                continue;
            }
            String[] f = t.split("\\s+");
            try {
                switch (f[0]) {
                    case "user":
                        expect(f, 3);
                        users.add(new UserScramCredentialUpsertion(
                                f[1], new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), f[2]));
                        userNames.add(f[1]);
                        break;
                    case "allow":
                        allow.addAll(bindings(f));
                        break;
                    case "revoke":
                        revoke.addAll(bindings(f));
                        break;
                    default:
                        throw new IllegalArgumentException("unknown command " + f[0]);
                }
            } catch (IllegalArgumentException e) {
                // The line may hold a password: name the line by number and command only.
                System.err.println("DkgSecurity: line " + n + " (" + f[0] + "): " + e.getMessage());
                System.exit(1);
            }
        }
        try (Admin admin = Admin.create(props)) {
            if (!users.isEmpty()) {
                admin.alterUserScramCredentials(users).all().get(DEADLINE_MS, TimeUnit.MILLISECONDS);
            }
            if (!allow.isEmpty()) {
                admin.createAcls(allow).all().get(DEADLINE_MS, TimeUnit.MILLISECONDS);
            }
            if (!revoke.isEmpty()) {
                List<AclBindingFilter> filters = new ArrayList<>();
                for (AclBinding b : revoke) {
                    filters.add(b.toFilter());
                }
                admin.deleteAcls(filters).all().get(DEADLINE_MS, TimeUnit.MILLISECONDS);
            }
            waitApplied(admin, userNames, allow, revoke);
        }
    }

    private static void expect(String[] f, int fields) {
        if (f.length != fields) {
            throw new IllegalArgumentException("expected " + fields + " fields, got " + f.length);
        }
    }

    private static List<AclBinding> bindings(String[] f) {
        expect(f, 6);
        if (!f[1].startsWith("User:")) {
            throw new IllegalArgumentException("principal must be User:NAME, got " + f[1]);
        }
        ResourcePattern pattern = new ResourcePattern(
                ResourceType.fromString(f[2]), f[4], PatternType.fromString(f[3]));
        if (pattern.resourceType() == ResourceType.UNKNOWN || pattern.patternType() == PatternType.UNKNOWN) {
            throw new IllegalArgumentException("unknown resource type or pattern type in " + String.join(" ", f));
        }
        List<AclBinding> out = new ArrayList<>();
        for (String op : f[5].split(",")) {
            AclOperation operation = AclOperation.fromString(op);
            if (operation == AclOperation.UNKNOWN || operation == AclOperation.ANY) {
                throw new IllegalArgumentException("unknown operation " + op);
            }
            out.add(new AclBinding(pattern, new AccessControlEntry(f[1], "*", operation, AclPermissionType.ALLOW)));
        }
        return out;
    }

    // The broker answers describe calls from its own copy of the metadata: once it lists every change, a
    // client's next request is authorised against them.
    private static void waitApplied(Admin admin, Set<String> users, List<AclBinding> added, List<AclBinding> removed)
            throws Exception {
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (true) {
            Set<AclBinding> present = new HashSet<>(
                    admin.describeAcls(AclBindingFilter.ANY).values().get(DEADLINE_MS, TimeUnit.MILLISECONDS));
            Set<String> known = Set.of();
            if (!users.isEmpty()) {
                try {
                    known = admin.describeUserScramCredentials(new ArrayList<>(users)).all()
                            .get(DEADLINE_MS, TimeUnit.MILLISECONDS).keySet();
                } catch (ExecutionException e) {
                    // ResourceNotFoundException: a user the broker does not know yet; asked again below.
                }
            }
            boolean done = present.containsAll(added) && known.containsAll(users);
            for (AclBinding b : removed) {
                done &= !present.contains(b);
            }
            if (done) {
                return;
            }
            if (System.currentTimeMillis() > deadline) {
                System.err.println("DkgSecurity: the broker did not report the changes within " + DEADLINE_MS + " ms");
                System.exit(1);
            }
            Thread.sleep(50);
        }
    }
}
