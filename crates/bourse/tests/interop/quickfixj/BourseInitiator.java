// A FIX 4.4 initiator written as a QuickFIX/J user writes one (an Application, a
// SessionSettings file with a FileStore, a SocketInitiator; the library unmodified),
// driven by crates/bourse/tests/fix_interop.rs against `bourse serve --demo`.
//
// Usage: java BourseInitiator PHASE HOST PORT KEY SECRET STORE_DIR
//   PHASE "trade": places, replaces and cancels orders, trades against an order placed
//   over REST, opens a futures position (SHFE.cu2501, the close-today rule) and closes
//   it the same day with PositionEffect T (a plain C is refused: it closes only
//   positions from before the day's settlement), says READY and waits for a line on stdin (the test then fills part of
//   its resting order over REST), waits for that fill's report, then drops the
//   connection mid-stream (the JVM halts: no Logout).
//   PHASE "recover": logs on again with the same FileStore and waits for the reports
//   it missed (resent by Bourse with PossDupFlag), then logs out.
// Every application message received is printed as one line, "FIXJSON {...}".
//
// Bourse's Logon: Username (553) = the API key id, RawData (96) = hex
// HMAC-SHA256(secret, SendingTime-in-ms + "\nGET\n/v1/fix\n"), set in toAdmin.

import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.Iterator;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

import quickfix.Application;
import quickfix.DefaultMessageFactory;
import quickfix.Field;
import quickfix.FileStoreFactory;
import quickfix.Message;
import quickfix.ScreenLogFactory;
import quickfix.Session;
import quickfix.SessionID;
import quickfix.SessionSettings;
import quickfix.SocketInitiator;
import quickfix.field.ClOrdID;
import quickfix.field.ExecType;
import quickfix.field.MsgType;
import quickfix.field.OrdStatus;
import quickfix.field.OrdType;
import quickfix.field.OrderQty;
import quickfix.field.OrigClOrdID;
import quickfix.field.PositionEffect;
import quickfix.field.PossDupFlag;
import quickfix.field.Price;
import quickfix.field.RawData;
import quickfix.field.RawDataLength;
import quickfix.field.SendingTime;
import quickfix.field.Side;
import quickfix.field.Symbol;
import quickfix.field.TimeInForce;
import quickfix.field.TransactTime;
import quickfix.field.Username;
import quickfix.fix44.NewOrderSingle;
import quickfix.fix44.OrderCancelReplaceRequest;
import quickfix.fix44.OrderCancelRequest;

public class BourseInitiator implements Application {
    private final String key;
    private final String secret;
    private final CountDownLatch loggedOn = new CountDownLatch(1);
    private final BlockingQueue<Message> received = new LinkedBlockingQueue<>();

    BourseInitiator(String key, String secret) {
        this.key = key;
        this.secret = secret;
    }

    @Override public void onCreate(SessionID sessionId) {}
    @Override public void onLogon(SessionID sessionId) { loggedOn.countDown(); }
    @Override public void onLogout(SessionID sessionId) {}
    @Override public void fromAdmin(Message message, SessionID sessionId) {}
    @Override public void toApp(Message message, SessionID sessionId) {}

    @Override
    public void toAdmin(Message message, SessionID sessionId) {
        try {
            if (!MsgType.LOGON.equals(message.getHeader().getString(MsgType.FIELD))) {
                return;
            }
            LocalDateTime sent = message.getHeader().getUtcTimeStamp(SendingTime.FIELD);
            long millis = sent.toInstant(ZoneOffset.UTC).toEpochMilli();
            String signature = sign(millis + "\nGET\n/v1/fix\n");
            message.setString(Username.FIELD, key);
            message.setInt(RawDataLength.FIELD, signature.length());
            message.setString(RawData.FIELD, signature);
        } catch (Exception error) {
            throw new RuntimeException(error);
        }
    }

    @Override
    public void fromApp(Message message, SessionID sessionId) {
        System.out.println("FIXJSON " + json(message));
        System.out.flush();
        received.add(message);
    }

    private String sign(String text) throws Exception {
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(secret.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
        StringBuilder hex = new StringBuilder();
        for (byte b : mac.doFinal(text.getBytes(StandardCharsets.UTF_8))) {
            hex.append(String.format("%02x", b));
        }
        return hex.toString();
    }

    /// The message's header and body fields as one JSON object, tag -> value.
    private static String json(Message message) {
        StringBuilder out = new StringBuilder("{");
        appendFields(out, message.getHeader().iterator());
        appendFields(out, message.iterator());
        return out.append("}").toString();
    }

    private static void appendFields(StringBuilder out, Iterator<Field<?>> fields) {
        while (fields.hasNext()) {
            Field<?> field = fields.next();
            if (out.length() > 1) out.append(",");
            String value = field.getObject().toString().replace("\\", "\\\\").replace("\"", "\\\"");
            out.append("\"").append(field.getTag()).append("\":\"").append(value).append("\"");
        }
    }

    /// The next report matching `wanted`, within 20 s.
    private Message await(String what, java.util.function.Predicate<Message> wanted) throws Exception {
        long deadline = System.currentTimeMillis() + 20_000;
        while (System.currentTimeMillis() < deadline) {
            Message message = received.poll(200, TimeUnit.MILLISECONDS);
            if (message != null && wanted.test(message)) return message;
        }
        throw new IllegalStateException("no " + what + " within 20 s");
    }

    private static boolean is(Message message, String clOrdId, char execType) {
        try {
            return message.getHeader().getString(MsgType.FIELD).equals(MsgType.EXECUTION_REPORT)
                && message.getString(ClOrdID.FIELD).equals(clOrdId)
                && message.getChar(ExecType.FIELD) == execType;
        } catch (Exception error) {
            return false;
        }
    }

    /// Bourse's PositionEffect (77) for closing today's position on a contract with the
    /// close-today rule (FIX 4.4 has none; docs/fix.md). QuickFIX/J sends it as any
    /// char: only what it receives is checked against its data dictionary.
    private static final char CLOSE_TODAY = 'T';

    /// An IOC order for 1 lot of SHFE.cu2501 with PositionEffect `effect`.
    private static NewOrderSingle future(String id, char side, String price, char effect) {
        NewOrderSingle order = limit(id, side, "1", price, TimeInForce.IMMEDIATE_OR_CANCEL);
        order.set(new Symbol("SHFE.cu2501"));
        order.set(new PositionEffect(effect));
        return order;
    }

    private static NewOrderSingle limit(String id, char side, String qty, String price, char tif) {
        NewOrderSingle order = new NewOrderSingle(new ClOrdID(id), new Side(side),
            new TransactTime(LocalDateTime.now(ZoneOffset.UTC)), new OrdType(OrdType.LIMIT));
        order.set(new Symbol("BTC-USD"));
        order.set(new OrderQty(Double.parseDouble(qty)));
        order.set(new Price(Double.parseDouble(price)));
        order.set(new TimeInForce(tif));
        return order;
    }

    public static void main(String[] args) throws Exception {
        String phase = args[0];
        String settingsText = String.join("\n",
            "[default]",
            "ConnectionType=initiator",
            "BeginString=FIX.4.4",
            "SenderCompID=ALICE",
            "TargetCompID=BOURSE",
            "SocketConnectHost=" + args[1],
            "SocketConnectPort=" + args[2],
            "HeartBtInt=5",
            "ReconnectInterval=1",
            "FileStorePath=" + args[5],
            "StartTime=00:00:00",
            "EndTime=00:00:00",
            "NonStopSession=Y",
            "UseDataDictionary=Y",
            "DataDictionary=FIX44.xml",
            "[session]",
            "");
        SessionSettings settings =
            new SessionSettings(new ByteArrayInputStream(settingsText.getBytes(StandardCharsets.UTF_8)));
        BourseInitiator application = new BourseInitiator(args[3], args[4]);
        SocketInitiator initiator = new SocketInitiator(application, new FileStoreFactory(settings),
            settings, new ScreenLogFactory(true, true, true), new DefaultMessageFactory());
        initiator.start();
        if (!application.loggedOn.await(20, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no Logon within 20 s");
        }
        SessionID session = initiator.getSessions().get(0);
        if (phase.equals("trade")) {
            // A resting order, replaced, then canceled.
            Session.sendToTarget(limit("q1", Side.BUY, "0.01", "50000", TimeInForce.GOOD_TILL_CANCEL), session);
            application.await("q1 new", m -> is(m, "q1", ExecType.NEW));
            OrderCancelReplaceRequest replace = new OrderCancelReplaceRequest(new OrigClOrdID("q1"),
                new ClOrdID("q1r"), new Side(Side.BUY), new TransactTime(LocalDateTime.now(ZoneOffset.UTC)),
                new OrdType(OrdType.LIMIT));
            replace.set(new Symbol("BTC-USD"));
            replace.set(new OrderQty(0.02));
            replace.set(new Price(50001));
            Session.sendToTarget(replace, session);
            application.await("q1 replaced", m -> is(m, "q1r", ExecType.REPLACED));
            OrderCancelRequest cancel = new OrderCancelRequest(new OrigClOrdID("q1r"), new ClOrdID("q1c"),
                new Side(Side.BUY), new TransactTime(LocalDateTime.now(ZoneOffset.UTC)));
            cancel.set(new Symbol("BTC-USD"));
            Session.sendToTarget(cancel, session);
            application.await("q1 canceled", m -> is(m, "q1c", ExecType.CANCELED));
            // A cancel of an order that does not exist: an OrderCancelReject.
            OrderCancelRequest unknown = new OrderCancelRequest(new OrigClOrdID("nope"), new ClOrdID("q9c"),
                new Side(Side.BUY), new TransactTime(LocalDateTime.now(ZoneOffset.UTC)));
            unknown.set(new Symbol("BTC-USD"));
            Session.sendToTarget(unknown, session);
            application.await("cancel reject", m -> {
                try {
                    return m.getHeader().getString(MsgType.FIELD).equals(MsgType.ORDER_CANCEL_REJECT);
                } catch (Exception error) {
                    return false;
                }
            });
            // Trades against bob's order placed over REST (at 60001, inside the demo's quotes).
            Session.sendToTarget(limit("t1", Side.BUY, "0.01", "60001", TimeInForce.IMMEDIATE_OR_CANCEL), session);
            application.await("t1 trade", m -> is(m, "t1", ExecType.TRADE));
            // Futures: open 1 lot today against the demo maker's ask, then close it today.
            Session.sendToTarget(future("f1", Side.BUY, "75010", PositionEffect.OPEN), session);
            application.await("f1 trade", m -> is(m, "f1", ExecType.TRADE));
            Session.sendToTarget(future("f2", Side.SELL, "74990", PositionEffect.CLOSE), session);
            application.await("f2 rejected", m -> is(m, "f2", ExecType.REJECTED));
            Session.sendToTarget(future("f3", Side.SELL, "74990", CLOSE_TODAY), session);
            application.await("f3 trade", m -> is(m, "f3", ExecType.TRADE));
            // A resting order that bob's REST orders will fill.
            Session.sendToTarget(limit("q2", Side.BUY, "0.03", "60002", TimeInForce.GOOD_TILL_CANCEL), session);
            application.await("q2 new", m -> is(m, "q2", ExecType.NEW));
            System.out.println("READY");
            System.out.flush();
            new BufferedReader(new InputStreamReader(System.in)).readLine();
            application.await("q2 partial fill", m -> is(m, "q2", ExecType.TRADE));
            System.out.println("DROP");
            System.out.flush();
            // Mid-stream: no Logout, the socket just goes.
            Runtime.getRuntime().halt(0);
        } else {
            Message fill = application.await("q2 filled, resent", m -> {
                try {
                    return is(m, "q2", ExecType.TRADE) && m.getChar(OrdStatus.FIELD) == OrdStatus.FILLED;
                } catch (Exception error) {
                    return false;
                }
            });
            if (!fill.getHeader().isSetField(PossDupFlag.FIELD)) {
                throw new IllegalStateException("the missed report was not a resend: " + fill);
            }
            Session.lookupSession(session).logout("done");
            Thread.sleep(1000);
            initiator.stop();
            System.out.println("DONE");
        }
    }
}
