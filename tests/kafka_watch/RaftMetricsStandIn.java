import java.lang.management.ManagementFactory;
import java.util.LinkedHashMap;
import java.util.Map;
import javax.management.Attribute;
import javax.management.AttributeList;
import javax.management.AttributeNotFoundException;
import javax.management.DynamicMBean;
import javax.management.MBeanAttributeInfo;
import javax.management.MBeanInfo;
import javax.management.ObjectName;

/**
 * A small JVM that registers the MBean a KRaft node's raft-metrics are read from
 * (kafka.server:type=raft-metrics), so the JMX exporter agent attached to it, with the project's
 * rules (deploy/kafka-jmx-exporter.yml), serves what it serves beside a Kafka controller; without
 * starting Kafka. Run in source-file mode: java -javaagent:AGENT=HOST:PORT:CONFIG RaftMetricsStandIn.java
 * current-state=leader current-epoch=5 ... (a string attribute for current-state, numbers for the rest).
 * Prints "registered" once the MBean is in, then runs until killed.
 */
public class RaftMetricsStandIn implements DynamicMBean {
    private final Map<String, Object> values = new LinkedHashMap<>();

    RaftMetricsStandIn(String[] assignments) {
        for (String assignment : assignments) {
            String[] nameAndValue = assignment.split("=", 2);
            Object value = nameAndValue[0].equals("current-state") ? nameAndValue[1] : Double.valueOf(nameAndValue[1]);
            values.put(nameAndValue[0], value);
        }
    }

    @Override
    public Object getAttribute(String name) throws AttributeNotFoundException {
        if (!values.containsKey(name)) {
            throw new AttributeNotFoundException(name);
        }
        return values.get(name);
    }

    @Override
    public AttributeList getAttributes(String[] names) {
        AttributeList list = new AttributeList();
        for (String name : names) {
            if (values.containsKey(name)) {
                list.add(new Attribute(name, values.get(name)));
            }
        }
        return list;
    }

    @Override
    public void setAttribute(Attribute attribute) throws AttributeNotFoundException {
        throw new AttributeNotFoundException("read-only: " + attribute.getName());
    }

    @Override
    public AttributeList setAttributes(AttributeList attributes) {
        return new AttributeList();
    }

    @Override
    public Object invoke(String operation, Object[] params, String[] signature) {
        throw new UnsupportedOperationException(operation);
    }

    @Override
    public MBeanInfo getMBeanInfo() {
        MBeanAttributeInfo[] attributes = values.entrySet().stream()
            .map(e -> new MBeanAttributeInfo(e.getKey(), e.getValue().getClass().getName(), e.getKey(), true, false, false))
            .toArray(MBeanAttributeInfo[]::new);
        return new MBeanInfo(getClass().getName(), "raft-metrics stand-in", attributes, null, null, null);
    }

    public static void main(String[] args) throws Exception {
        ManagementFactory.getPlatformMBeanServer()
            .registerMBean(new RaftMetricsStandIn(args), new ObjectName("kafka.server:type=raft-metrics"));
        System.out.println("registered");
        System.out.flush();
        Thread.currentThread().join();
    }
}
